"""The unit tests' fakes of the API server and of time (not a test module).

- memory.py: the API server in memory, as the transport under a real `KubeClient`: what the
  reconciler, the elector, sharding and the other clients of runner/kube send;
- clock.py: the one fake clock, and an event loop that runs on it (virtual time);
- http.py: a real HTTP(S) server on 127.0.0.1 and a throwaway PKI, for the tests of what goes
  over the wire (credentials, TLS), and a collection listed and watched over HTTP (list/watch).
"""

from .clock import EPOCH, FakeClock, VirtualTimeLoop, run
from .http import LeaseHandler, Pki, WatchServer, serving, serving_certificate_for
from .memory import HOST, Exchange, FakeApi, Fault, merge_patch, path_of

__all__ = [
    "EPOCH",
    "HOST",
    "Exchange",
    "FakeApi",
    "FakeClock",
    "Fault",
    "LeaseHandler",
    "Pki",
    "VirtualTimeLoop",
    "WatchServer",
    "merge_patch",
    "path_of",
    "run",
    "serving",
    "serving_certificate_for",
]
