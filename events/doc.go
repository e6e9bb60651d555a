// Package events turns cardsign's audit records into CloudEvents 1.0 and
// delivers them, at least once, to the sinks an organisation runs next to
// its signing authority: signed webhooks (Standard Webhooks), syslog over
// TCP or TLS (RFC 5424, octet counting) and JSON-lines files.
//
// Delivery is from the audit log, never from memory. The audit log is
// already an ordered, hash-chained outbox: every signature, refusal, key
// change, registry action and approval is a record in it before anyone is
// told it happened. Each sink keeps a cursor in the store (the Seq of the
// last record it took); one replica delivers at a time, under the duties
// lease, and every cursor move is fenced by that lease. After a crash or a
// failover delivery resumes from the cursor, so an event can arrive twice,
// always with the same id (the record's hash), and never not at all. A sink
// that is down only lags: delivery reads the store and never holds a
// signature back.
//
// Every event carries the record's sequence number and hash and the hash
// of the record before it, so a consumer can detect a gap and check the
// chain itself.
package events
