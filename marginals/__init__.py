"""Site side of marg: codebook, encoding, counting, noise and summaries."""
