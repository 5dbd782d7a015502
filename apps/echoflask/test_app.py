"""Unit tests of the EchoFlask app with Flask's test client (stdlib unittest: they also run in
the image build, against the image's own Flask, where there is no pytest).

    python3 -m unittest -v test_app      # in apps/echoflask, wherever flask is importable
"""

from __future__ import annotations

import os
import signal
import unittest
from datetime import datetime
from unittest import mock

try:
    import app as echoflask
except ImportError as err:  # pragma: no cover - a host without flask
    raise unittest.SkipTest(f"flask is not importable here: {err}") from err

ENV = {"NODE_NAME": "real-node", "POD_IP": "10.244.0.7", "POD_NAME": "example-echoflask-abc"}


class EchoTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = echoflask.app.test_client()

    def test_echo_answers_the_seeds_json(self) -> None:
        with mock.patch.dict(os.environ, ENV):
            reply = self.client.get("/api/echo?Hello=World!")
        self.assertEqual(reply.status_code, 200)
        self.assertEqual(reply.mimetype, "application/json")
        body = reply.get_json()
        self.assertEqual(
            set(body), {"api", "nodename", "pod_ip", "podname", "query_string", "timestamp"}
        )
        self.assertEqual(body["api"], "echo")
        self.assertEqual(body["nodename"], "real-node")
        self.assertEqual(body["pod_ip"], "10.244.0.7")
        self.assertEqual(body["podname"], "example-echoflask-abc")
        self.assertEqual(body["query_string"], ["Hello=World!"])
        self.assertIsNotNone(datetime.fromisoformat(body["timestamp"]).tzinfo)

    def test_query_string_is_split_and_decoded(self) -> None:
        body = self.client.get("/api/echo?Hello=World%21&a=b").get_json()
        self.assertEqual(body["query_string"], ["Hello=World!", "a=b"])
        self.assertEqual(self.client.get("/api/echo").get_json()["query_string"], [])

    def test_podname_falls_back_to_the_host_name(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "POD_NAME"}
        with mock.patch.dict(os.environ, env, clear=True), mock.patch(
            "socket.gethostname", return_value="pod-from-hostname"
        ):
            body = self.client.get("/api/echo").get_json()
        self.assertEqual(body["podname"], "pod-from-hostname")

    def test_unknown_path_is_404(self) -> None:
        self.assertEqual(self.client.get("/nope").status_code, 404)


class SigtermTest(unittest.TestCase):
    def test_sigterm_exits_cleanly(self) -> None:
        previous = signal.getsignal(signal.SIGTERM)
        try:
            echoflask.exit_on_sigterm()
            handler = signal.getsignal(signal.SIGTERM)
            self.assertTrue(callable(handler))
            with self.assertRaises(SystemExit) as exited:
                handler(signal.SIGTERM, None)  # type: ignore[operator]
            self.assertEqual(exited.exception.code, 0)
        finally:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    unittest.main()
