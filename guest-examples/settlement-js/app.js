// The seed's settlement handler in JavaScript, against the RustStream 1.0 `subscriber` world.
//
// Written against the bindings componentize-js generates from `wit/` only: the host's
// functions are imported from their interface, and the `handler` export is an object with
// `describe` and `handle`, which books one ledger entry per call and returns its outcome.
//
// Build: componentize-js app.js --wit ../../wit --world-name subscriber -o settlement_js.wasm

import { log } from 'ruststream:handler/host@1.0.0';

const decoder = new TextDecoder();

// One line in the host's log, about the record being handled (record 0 of the call).
function logLine(level, message, fields) {
  log({
    level,
    message,
    fields: Object.entries(fields).map(([name, value]) => ({ name, value: String(value) })),
    record: 0,
  });
}

// Books an entry. An empty entry is retired; a refund waits for the payment it returns, and
// holds the shard's checkpoint in front of it until then.
function book(record) {
  let entry;
  try {
    entry = JSON.parse(decoder.decode(record.data));
  } catch (error) {
    logLine('error', 'the entry could not be decoded', { error: error.message });
    return { tag: 'drop' };
  }
  if (!Number.isInteger(entry?.id) || !Number.isInteger(entry?.amount)) {
    logLine('error', 'the entry could not be decoded', { error: 'id and amount must be integers' });
    return { tag: 'drop' };
  }
  if (entry.amount === 0) {
    return { tag: 'drop' };
  }
  if (entry.amount < 0) {
    return { tag: 'retry' };
  }
  logLine('info', 'booked', { 'entry.id': entry.id, amount: entry.amount });
  return { tag: 'ack' };
}

export const handler = {
  describe() {
    return {
      info: { name: 'ledger', version: '0.1.0' },
      subscriptions: [
        {
          name: 'book',
          stream: 'ledger',
          maxAttempts: undefined,
          deadLetter: undefined,
          start: undefined,
          onTrap: { tag: 'retry' },
          batchLimit: undefined,
        },
      ],
    };
  },
  handle(_info, record) {
    return book(record);
  },
};
