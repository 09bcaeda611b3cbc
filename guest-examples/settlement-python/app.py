"""The seed's settlement handler in Python, against the RustStream 1.0 `subscriber` world.

Written with the bindings componentize-py generates from `wit/` only: `describe` declares the
app, and `handle` books one ledger entry per call and returns its outcome.

Build: componentize-py -d ../../wit -w subscriber componentize app -o settlement_python.wasm
"""

import json

from wit_world import exports
from wit_world.exports import handler
from wit_world.imports import host, types


class Handler(exports.Handler):
    def describe(self) -> handler.App:
        book = handler.Subscription(
            name="book",
            stream="ledger",
            max_attempts=None,
            dead_letter=None,
            start=None,
            on_trap=types.FailureAction_Retry(),
            batch_limit=None,
        )
        return handler.App(
            info=handler.AppInfo(name="ledger", version="0.1.0"),
            subscriptions=[book],
        )

    def handle(self, info: handler.CallInfo, record: handler.Record) -> types.HandlerOutcome:
        """Books an entry. An empty entry is retired; a refund waits for the payment it
        returns, and holds the shard's checkpoint in front of it until then."""
        try:
            entry = json.loads(record.data)
            entry_id, amount = int(entry["id"]), int(entry["amount"])
        except (ValueError, KeyError, TypeError) as error:
            log(host.Level.ERROR, "the entry could not be decoded", error=str(error))
            return types.HandlerOutcome_Drop()
        if amount == 0:
            return types.HandlerOutcome_Drop()
        if amount < 0:
            return types.HandlerOutcome_Retry()
        log(host.Level.INFO, "booked", **{"entry.id": str(entry_id), "amount": str(amount)})
        return types.HandlerOutcome_Ack()


def log(level: host.Level, message: str, **fields: str) -> None:
    """One line in the host's log, about the record being handled (record 0 of the call)."""
    line = host.LogLine(
        level=level,
        message=message,
        fields=[host.Field(name=name, value=value) for name, value in fields.items()],
        record=0,
    )
    host.log(line)
