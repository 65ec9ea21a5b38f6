"""Wire fuzzer for both servers: see tests/fuzz/__main__.py."""
