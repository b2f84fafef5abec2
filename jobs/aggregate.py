"""Merge a run's partials into results and print its exactness (see ``--help``)."""

from skewlab.live.mains.jobs import aggregate_main

if __name__ == "__main__":
    raise SystemExit(aggregate_main())
