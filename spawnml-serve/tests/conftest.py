"""A real server on the loopback address, in a thread of the test process, for the tests to drive."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import uvicorn
from spawnml_serve import ServeConfig, create_app
from spawnml_serve.served import ServedModel


@dataclass
class RunningServer:
    """A uvicorn server on 127.0.0.1 and an ephemeral port."""

    server: uvicorn.Server
    thread: threading.Thread
    models: dict[str, ServedModel]

    @property
    def url(self) -> str:
        socket = self.server.servers[0].sockets[0]
        return f"http://127.0.0.1:{socket.getsockname()[1]}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def start_server(models: dict[str, ServedModel], config: ServeConfig | None = None) -> RunningServer:
    app = create_app(models, config)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    return RunningServer(server, thread, models)


def _servers() -> Iterator[Callable[..., RunningServer]]:
    running: list[RunningServer] = []

    def start(models: dict[str, ServedModel], config: ServeConfig | None = None) -> RunningServer:
        running.append(start_server(models, config))
        return running[-1]

    yield start
    for server in running:
        server.stop()


#: Start servers for one test (``serve``) or one module (``serve_module``); they stop after it.
serve = pytest.fixture(_servers)
serve_module = pytest.fixture(scope="module")(_servers)
