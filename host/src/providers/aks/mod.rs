//! Azure Kubernetes Service: the `aks` provider ([`AksProvider`]), members named by Azure's own
//! `clusterResourceId`, reached through Azure Resource Manager (pinned api-version
//! [`arm::API_VERSION`]).
//!
//! - [`model`]: the pure half — AKS's JSON read into what waverun understands (versions, pools,
//!   images, power state, maintenance windows, releases per region), and the JSON sent back
//!   (GET-modify-PUT bodies that keep every field waverun does not model).
//! - [`auth`]: Microsoft Entra tokens the way the Azure SDKs get them (client secret, workload
//!   identity, managed identity, the Azure CLI), cached and refreshed before expiry.
//! - [`arm`]: a blocking ARM client (api-versions, same-host polling URLs, one refresh on 401,
//!   client-side rate limits per subscription, 429s honoured, uncertain writes, metrics).
//! - [`provider`]: the [`crate::providers::Provider`] contract over them: which calls each
//!   upgrade type makes, long-running operations, and what success is.

pub mod arm;
pub mod auth;
pub mod model;
mod provider;

pub use provider::{AksProvider, Handle, HandleKind};
