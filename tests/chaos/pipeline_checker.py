"""The check of the consume-transform-produce pipeline: exactly one output per input.

The pipeline (``pipeline_workload.py``) reads its input topic read_committed in a
consumer group and writes, per input record, one output record in a transaction that
also carries the group's offsets (``send_offsets_to_transaction``). Each output names
its input and the transaction that wrote it (:func:`output_value`), so an input
processed twice by two committed transactions shows as two outputs.

In the final read_committed read-back of the output topic, after the pipeline caught
up with its input:

- **pipeline dup**: an input has more than one output;
- **pipeline missing**: an acknowledged input has none (an input whose send ended
  ambiguously may have none, if it was never written; at most one all the same).

The transactions' own properties (aborted reads, torn, past LSO, lost) are checked by
``txn_checker.py``: the pipeline's transactions are in ``History.txns`` too.
"""

from __future__ import annotations

from collections import defaultdict

from .history import FINAL_SESSION, OK, Anomaly, History

PIPELINE_CHECKS = ("pipeline_dup", "pipeline_missing")
SEPARATOR = ">"


def output_value(input_value: str, txn_label: str) -> str:
    return f"{input_value}{SEPARATOR}{txn_label}"


def input_of(output: str) -> str:
    return output.split(SEPARATOR, 1)[0]


def outputs_per_input(history: History) -> dict[str, list[tuple[int, int, str]]]:
    """Input value -> the (partition, offset, output value)s of the final read-back."""
    found: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for read in history.txn_reads:
        if read.session == FINAL_SESSION and read.topic == history.pipeline_output:
            found[input_of(read.value)].append((read.partition, read.offset, read.value))
    return found


def check_pipeline(history: History) -> dict[str, list[Anomaly]]:
    if not history.pipeline_output:
        return {name: [] for name in PIPELINE_CHECKS}
    outputs = outputs_per_input(history)
    ended = {record.value: (txn.t_end if txn.t_end >= 0 else txn.t_begin)
             for txn in history.txns for record in txn.records}
    complete = all(tp in history.txn_final_complete for tp in
                   {(r.topic, r.partition) for r in history.txn_reads
                    if r.topic == history.pipeline_output}) and bool(history.txn_final_complete)
    duplicates, missing = [], []
    for send in history.pipeline_inputs:
        found = outputs.get(send.value, [])
        if len(found) > 1:
            second = sorted(ended.get(value, history.t_end) for _, _, value in found)[1]
            partition, offset, _ = sorted(found)[1]
            duplicates.append(Anomaly(
                "pipeline_dup", second, partition, offset,
                f"input {send.value!r} has {len(found)} outputs: "
                f"{[f'{v} at {p}/{o}' for p, o, v in sorted(found)]}"))
        elif not found and send.outcome == OK:
            why = "" if complete else " (the output topic could not be read back whole)"
            missing.append(Anomaly(
                "pipeline_missing", send.t_done, send.partition, send.offset,
                f"input {send.value!r} acknowledged at {send.partition}/{send.offset} has "
                f"no output{why}"))
    return {"pipeline_dup": duplicates, "pipeline_missing": missing}


def pipeline_info(history: History) -> dict[str, object]:
    outputs = outputs_per_input(history)
    return {"inputs": len(history.pipeline_inputs),
            "inputs_acked": sum(1 for s in history.pipeline_inputs if s.outcome == OK),
            "outputs": sum(len(v) for v in outputs.values())}
