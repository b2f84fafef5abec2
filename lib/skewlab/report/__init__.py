"""Human-facing reports of runs: text tables (here) and plots (:mod:`.plots`).

:mod:`skewlab.report.plots` imports matplotlib (Agg backend) only when a plot
is drawn, so importing this package stays light.
"""

from skewlab.report.table import SIM_COLUMNS, format_table, sim_rows, sim_table

__all__ = ["SIM_COLUMNS", "format_table", "sim_rows", "sim_table"]
