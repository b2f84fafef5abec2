"""Pure pieces of the live data path: the event codec, the worker's windowed
operator and the exactness check. Jobs and Spark adapters call these; they
decide nothing themselves.
"""
