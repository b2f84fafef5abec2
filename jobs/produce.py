"""Produce a workload to Kafka at a target rate (see ``--help``)."""

from skewlab.live.mains.jobs import produce_main

if __name__ == "__main__":
    raise SystemExit(produce_main())
