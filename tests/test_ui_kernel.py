"""In a real ipykernel, the pump's updates reach the frontend while a cell keeps the kernel busy.

A frontend sees a widget only through comm messages on the kernel's iopub channel. This test
is that frontend: it runs cells with jupyter_client and reads iopub, checking that the live
plot's bokeh patches (including the control-change marker) and the status line's updates
arrive while a long cell runs, i.e. that the UI does not depend on the kernel being idle.
"""

from __future__ import annotations

import json
import queue
import time

SETUP = """
import json, esnb
from esnb.ui import dashboard
runner = esnb.ES("CartPole-v1", population=10, noise_size=1_000_000, eval_interval=0)
board = dashboard(runner, update_interval=0.2)
print(json.dumps({"plot": board.plot.comm.comm_id, "status": board.panel.status.comm.comm_id}))
"""

BUSY = """
import time
runner.start(generations=40)
while runner.iteration < 5:
    time.sleep(0.01)
board.panel.fields["sigma"].value = 0.05
runner.wait()
board.plot.wait_drawn()
deadline = time.monotonic() + 60  # the status line catches up (the pump refreshes it 4x a second)
while "finished" not in board.panel.status.value and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def _run(kc, code, timeout=120):
    """Execute ``code``; return its iopub messages up to the kernel going idle."""
    msg_id = kc.execute(code)
    messages = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        messages.append(msg)
        if (msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
                and msg["parent_header"].get("msg_id") == msg_id):
            return messages
        if msg["msg_type"] == "error":
            raise AssertionError("\n".join(msg["content"]["traceback"]))
    raise AssertionError(f"cell did not finish in {timeout} s")


def _decoded(payload) -> str:
    try:
        return json.dumps(json.loads(payload), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(payload)


def test_plot_and_status_reach_the_frontend_while_a_cell_runs(kernel):
    _, kc = kernel
    out = _run(kc, SETUP)
    ids = json.loads(next(m["content"]["text"] for m in out if m["msg_type"] == "stream"))
    busy = _run(kc, BUSY)

    comm = [m for m in busy if m["msg_type"] == "comm_msg"]
    # BokehModel.send() is a widget's custom message: {"method": "custom", "content": ...}
    patches = [m["content"]["data"].get("content", {}) for m in comm
               if m["content"]["comm_id"] == ids["plot"]
               and m["content"]["data"].get("method") == "custom"]
    statuses = [m["content"]["data"].get("state", {}).get("value", "") for m in comm
                if m["content"]["comm_id"] == ids["status"]]
    assert sum(p.get("msg") == "patch" for p in patches) >= 8  # several streams, not one
    text = " ".join(_decoded(p.get("payload")) for p in patches)
    assert "ColumnsStreamed" in text
    assert "sigma 0.02→0.05" in text  # the marker went to the browser
    assert any("<b>running</b>" in s for s in statuses)
    assert "<b>finished</b>" in statuses[-1] and "generation 40" in statuses[-1]
