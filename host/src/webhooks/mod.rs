//! Events out: the engine's events, from the store's event log, delivered to event
//! subscriptions as signed webhooks — CloudEvents 1.0 in structured JSON mode, signed as the
//! Standard Webhooks specification says, at least once and in order per subscription.
//!
//! Rooms, each one concept; all but [`sender`] and [`driver`] without threads, a store, a clock
//! or I/O:
//! - [`subscription`]: a subscription as the API takes it (Event Grid's shape), checked, and
//!   which events it receives;
//! - [`destination`]: which endpoints and addresses a delivery may go to (SSRF rules);
//! - [`cloudevent`]: one stored event as the CloudEvent a receiver gets (`type`, `subject`,
//!   `severity`, links);
//! - [`signature`]: the `webhook-id`, `webhook-timestamp` and `webhook-signature` headers,
//!   and signing secrets (`whsec_…`);
//! - [`delivery`]: every subscription's lane — cursor, order, back-off, `Retry-After`,
//!   maximum age, dead letters, redelivery — as a state machine on the driver's clock;
//! - [`sender`]: one attempt over the network (deadline, response-size limit, no redirects,
//!   only checked addresses).
//!
//! - [`driver`]: the edge — one thread that reads the log, runs the lanes' attempts, and hands
//!   cursors, dead letters and the delivery logs to the store's one writer;
//! - [`stored`]: a subscription as the store keeps it (its secrets) and as the API shows it;
//! - [`service`]: the driver started over the daemon's store, and the API's handle on it.

pub mod cloudevent;
pub mod delivery;
pub mod destination;
pub mod driver;
pub mod sender;
pub mod service;
pub mod signature;
pub mod stored;
pub mod subscription;
