"""What a defined (not built) DALI graph holds, for tests of GPU graphs on machines without
a GPU: the operators reachable from its outputs, with the devices of their outputs."""
from __future__ import annotations

import re


def _op_name(instance_name: str) -> str:
    """`__Resize_1` -> `Resize` (DALI names unnamed operator instances `__<Op>_<n>`)."""
    return re.sub(r"^__|_\d+$", "", instance_name)


def graph_ops(pipe) -> dict[str, set[str]]:
    """Operator name -> devices of its outputs, over every node reachable from the outputs."""
    ops: dict[str, set[str]] = {}
    seen: set[int] = set()
    todo = list(pipe._graph_out)
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        ops.setdefault(_op_name(node.source.name), set()).add(node.device)
        todo.extend(node.source.inputs)
    return ops


def output_devices(pipe) -> list[str]:
    """The device of each graph output, in order."""
    return [node.device for node in pipe._graph_out]


def decodes_on_gpu(pipe) -> bool:
    """Whether an image or video decoder of the graph gives GPU outputs (a "mixed" decoder)."""
    return any(name.startswith(("Image", "Video", "Decoders")) and "gpu" in devices
               for name, devices in graph_ops(pipe).items())
