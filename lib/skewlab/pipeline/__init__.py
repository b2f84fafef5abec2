"""Pure pieces of the live data path: the event codec, the splitter, the worker's windowed
operator, the hand-off and the exactness check. Jobs and Spark adapters call these; they
decide nothing themselves. Notes: docs/pipeline.md.
"""
