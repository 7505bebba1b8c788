"""Dataset rows (reading, validation, conversion, split) and the metrics computed on them."""
