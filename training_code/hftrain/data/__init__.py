"""The rows a run trains on: loading raw data, sharding across ranks, batching, packing, and the tokenized cache."""
