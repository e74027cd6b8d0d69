//! Policy: who may get a connection, and where it goes. Decisions only, no
//! sockets.
//! (layer doc: written in full once the layer is complete)

pub mod acl;
pub mod balance;
pub mod cidr;
pub mod health;
pub mod limit;
pub mod maglev;
pub mod source_limit;
