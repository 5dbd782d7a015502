"""The unit tests' fakes of the API server (not a test module).

- http.py: a real HTTP(S) server on 127.0.0.1 and a throwaway PKI, for the tests of what goes
  over the wire (credentials, TLS).
"""

from .http import LeaseHandler, Pki, serving, serving_certificate_for

__all__ = ["LeaseHandler", "Pki", "serving", "serving_certificate_for"]
