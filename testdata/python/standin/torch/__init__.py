"""A stand-in for the parts of torch gpuprof's tests need: see utils/data."""
