"""Tools for testing and benchmarking the data plane; none of it runs in production.

Outside the product package on purpose: the inference image copies only
``sits_inference/``, and import-linter forbids ``sits_inference`` to import this package.
Tests and benchmarks both use it (a benchmark never imports from ``tests/``):

- ``stub``: a fast fake OpenAI upstream (``python -m sits_inference_testing.stub``);
- ``metrics``: reading a ``/metrics`` page;
- ``load``: bounded concurrent load, polling until a condition holds, reading a broken stream;
- ``sidecar``: the ``sits-cache`` console script as a process;
- ``vectors``: synthetic clustered embeddings for the vector tier (L2), and serving its
  routes on loopback.
"""
