//! An event subscription as the store keeps it (the `eventSubscriptions` resource's body),
//! and what the API shows of it: the properties as written, its signing secrets (never shown
//! again after the answer that created them), and where in the event log it starts.
//!
//! ```json
//! {"properties": {…as written…},
//!  "secrets": [{"secret": "whsec_…", "createdAt": "…", "expiresAtMs": null}, …],
//!  "startAfter": 1234}
//! ```
//!
//! Secrets are newest first. A rotation puts a new one first and gives the others an
//! `expiresAtMs` ([`ROTATION_OVERLAP_MS`] later): until then deliveries carry a signature for
//! each, so receivers can move to the new secret without losing a delivery.

use super::destination::AddressPolicy;
use super::driver::Active;
use super::signature::SigningKey;
use super::subscription::{self, Subscription};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How long an old secret keeps signing after a rotation: a day.
pub const ROTATION_OVERLAP_MS: i64 = 24 * 3_600_000;
/// The most secrets a subscription signs with at once (during rotations).
pub const MAX_SECRETS: usize = 3;

/// One signing secret of a subscription.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredSecret {
    /// `whsec_…`.
    pub secret: String,
    /// When it was made (RFC 3339).
    pub created_at: String,
    /// After this (ms since the epoch), it signs no more.
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
}

/// The stored body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    /// The properties as written (checked by [`subscription::parse`]).
    pub properties: Value,
    /// Its own secrets, newest first (empty when it signs with a configured one).
    #[serde(default)]
    pub secrets: Vec<StoredSecret>,
    /// The log's end when it was created: it receives the events after it.
    #[serde(default)]
    pub start_after: u64,
}

impl Stored {
    /// A new subscription's body: a generated secret unless it names a configured one.
    pub fn create(
        properties: Value,
        sub: &Subscription,
        start_after: u64,
        now: &str,
    ) -> Result<(Stored, Option<String>), String> {
        let mut secrets = Vec::new();
        let mut shown = None;
        if sub.secret_ref.is_none() {
            let key = SigningKey::generate()?;
            shown = Some(key.secret());
            secrets.push(StoredSecret {
                secret: key.secret(),
                created_at: now.to_string(),
                expires_at_ms: None,
            });
        }
        Ok((
            Stored {
                properties,
                secrets,
                start_after,
            },
            shown,
        ))
    }

    /// The same subscription with new properties: its secrets and place are kept; one that
    /// now signs with its own secrets and has none gets one (shown once).
    pub fn update(
        &self,
        properties: Value,
        sub: &Subscription,
        now: &str,
    ) -> Result<(Stored, Option<String>), String> {
        let mut next = Stored {
            properties,
            secrets: self.secrets.clone(),
            start_after: self.start_after,
        };
        let mut shown = None;
        if sub.secret_ref.is_some() {
            // Signing with a configured secret now: its own are dropped, and a later change
            // back makes (and shows) a new one.
            next.secrets.clear();
        }
        if sub.secret_ref.is_none() && next.secrets.is_empty() {
            let key = SigningKey::generate()?;
            shown = Some(key.secret());
            next.secrets.push(StoredSecret {
                secret: key.secret(),
                created_at: now.to_string(),
                expires_at_ms: None,
            });
        }
        Ok((next, shown))
    }

    /// A new secret first; the others sign until [`ROTATION_OVERLAP_MS`] from `now_ms` (or
    /// their own earlier end). Returns the new secret, to be shown once.
    pub fn rotate(&mut self, now_ms: i64, now: &str) -> Result<String, String> {
        let key = SigningKey::generate()?;
        let until = now_ms + ROTATION_OVERLAP_MS;
        for s in &mut self.secrets {
            s.expires_at_ms = Some(s.expires_at_ms.map_or(until, |e| e.min(until)));
        }
        self.secrets
            .retain(|s| s.expires_at_ms.is_none_or(|e| e > now_ms));
        self.secrets.insert(
            0,
            StoredSecret {
                secret: key.secret(),
                created_at: now.to_string(),
                expires_at_ms: None,
            },
        );
        // Rotations in quick succession: the newest and the two before it sign, no more.
        self.secrets.truncate(MAX_SECRETS);
        Ok(key.secret())
    }

    /// The keys it signs with at `now_ms`, newest first.
    pub fn keys(
        &self,
        sub: &Subscription,
        configured: &BTreeMap<String, SigningKey>,
        now_ms: i64,
    ) -> Vec<SigningKey> {
        if let Some(r) = &sub.secret_ref {
            return configured.get(r).cloned().into_iter().collect();
        }
        self.secrets
            .iter()
            .filter(|s| s.expires_at_ms.is_none_or(|e| e > now_ms))
            .filter_map(|s| SigningKey::parse(&s.secret).ok())
            .collect()
    }

    /// What the API shows: the properties, and of the secrets only how many sign and until
    /// when (never a secret).
    pub fn public_properties(&self) -> Value {
        let mut p = self.properties.clone();
        let signing = json!({
            "secretRef": p["signing"]["secretRef"],
            "secrets": self.secrets.iter().map(|s| json!({
                "createdAt": s.created_at,
                "expiresAt": s.expires_at_ms.and_then(chrono::DateTime::from_timestamp_millis)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            })).collect::<Vec<_>>(),
        });
        if let Some(o) = p.as_object_mut() {
            let mut signing = signing;
            if signing["secretRef"].is_null() {
                signing.as_object_mut().map(|s| s.remove("secretRef"));
            }
            o.insert("signing".into(), signing);
        }
        p
    }
}

/// Every stored subscription the driver serves, as it reads them; one that no longer reads
/// (a secret named in it left the configuration) is left out, said in the log.
pub fn active(
    bodies: &[(String, Option<String>)],
    policy: AddressPolicy,
    configured: &BTreeMap<String, SigningKey>,
    now_ms: i64,
) -> BTreeMap<String, Active> {
    let names: Vec<&str> = configured.keys().map(String::as_str).collect();
    let mut out = BTreeMap::new();
    for (name, body) in bodies {
        let stored: Stored = match body.as_deref().map(serde_json::from_str) {
            Some(Ok(s)) => s,
            _ => {
                tracing::warn!(subscription = %name, "a stored event subscription does not read; it is not served");
                continue;
            }
        };
        let text = json!({ "properties": stored.properties }).to_string();
        let sub = match subscription::parse(&text, policy, &names) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(subscription = %name, error = %e, "an event subscription no longer holds under this configuration; it is not served");
                continue;
            }
        };
        let keys = stored.keys(&sub, configured, now_ms);
        let max_age_ms = i64::from(sub.ttl_minutes) * 60_000;
        let keys_until_ms = match &sub.secret_ref {
            Some(_) => None,
            None => stored
                .secrets
                .iter()
                .filter_map(|s| s.expires_at_ms)
                .filter(|e| *e > now_ms)
                .min(),
        };
        out.insert(
            name.clone(),
            Active {
                subscription: sub,
                keys,
                start_after: stored.start_after,
                max_age_ms,
                keys_until_ms,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(extra: Value) -> Value {
        let mut p = json!({"destination": {"endpointType": "WebHook",
            "properties": {"endpointUrl": "https://hooks.example.com/in"}}});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    }

    fn sub(p: &Value, names: &[&str]) -> Subscription {
        subscription::parse(
            &json!({ "properties": p }).to_string(),
            AddressPolicy::default(),
            names,
        )
        .unwrap()
    }

    #[test]
    fn a_new_subscription_gets_a_secret_shown_once_and_never_in_its_public_view() {
        let p = props(json!({}));
        let (stored, shown) = Stored::create(p.clone(), &sub(&p, &[]), 41, "t0").unwrap();
        let secret = shown.expect("shown once");
        assert!(secret.starts_with("whsec_"));
        assert_eq!(stored.start_after, 41);
        let public = stored.public_properties().to_string();
        assert!(!public.contains(&secret[6..]), "{public}");
        assert!(!public.contains("whsec_"), "{public}");
        assert_eq!(
            stored.public_properties()["signing"]["secrets"][0]["createdAt"],
            "t0"
        );
        // Changing it keeps the secret and the place, and shows nothing.
        let p2 = props(json!({"enabled": false}));
        let (next, shown) = stored.update(p2.clone(), &sub(&p2, &[]), "t1").unwrap();
        assert_eq!(shown, None);
        assert_eq!(next.secrets, stored.secrets);
        assert_eq!(next.start_after, 41);
    }

    #[test]
    fn a_rotation_signs_with_both_secrets_for_a_day_then_with_the_new_one() {
        let p = props(json!({}));
        let s = sub(&p, &[]);
        let (mut stored, old) = Stored::create(p, &s, 0, "t0").unwrap();
        let none = BTreeMap::new();
        let new = stored.rotate(1_000, "t1").unwrap();
        let keys = stored.keys(&s, &none, 2_000);
        assert_eq!(
            keys.iter().map(SigningKey::secret).collect::<Vec<_>>(),
            [new.clone(), old.unwrap()],
            "the newest first, both during the overlap"
        );
        let later = stored.keys(&s, &none, 1_000 + ROTATION_OVERLAP_MS + 1);
        assert_eq!(
            later.iter().map(SigningKey::secret).collect::<Vec<_>>(),
            [new]
        );
    }

    #[test]
    fn rotations_in_quick_succession_sign_with_three_secrets_at_most() {
        let p = props(json!({}));
        let s = sub(&p, &[]);
        let (mut stored, _) = Stored::create(p, &s, 0, "t0").unwrap();
        let mut newest = Vec::new();
        for i in 0..5 {
            newest.insert(0, stored.rotate(1_000 + i, "t").unwrap());
        }
        let keys = stored.keys(&s, &BTreeMap::new(), 2_000);
        assert_eq!(
            keys.iter().map(SigningKey::secret).collect::<Vec<_>>(),
            newest[..MAX_SECRETS]
        );
    }

    #[test]
    fn a_subscription_moved_to_a_configured_secret_drops_its_own_and_gets_a_new_one_back() {
        let own = props(json!({}));
        let (stored, first) = Stored::create(own.clone(), &sub(&own, &[]), 0, "t0").unwrap();
        let named = props(json!({"signing": {"secretRef": "pager"}}));
        let (moved, shown) = stored
            .update(named.clone(), &sub(&named, &["pager"]), "t1")
            .unwrap();
        assert_eq!(shown, None);
        assert!(moved.secrets.is_empty(), "its own secret is dropped");
        let (back, shown) = moved.update(own.clone(), &sub(&own, &[]), "t2").unwrap();
        let second = shown.expect("a new secret, shown once");
        assert_ne!(Some(second.clone()), first);
        assert_eq!(back.secrets.len(), 1);
        assert_eq!(back.secrets[0].secret, second);
    }

    #[test]
    fn a_configured_secret_signs_and_none_is_generated_or_stored() {
        let p = props(json!({"signing": {"secretRef": "pager"}}));
        let s = sub(&p, &["pager"]);
        let (stored, shown) = Stored::create(p, &s, 0, "t0").unwrap();
        assert_eq!(shown, None);
        assert!(stored.secrets.is_empty());
        let key = SigningKey::generate().unwrap();
        let configured = BTreeMap::from([("pager".to_string(), key.clone())]);
        assert_eq!(stored.keys(&s, &configured, 0), [key]);
        assert_eq!(stored.public_properties()["signing"]["secretRef"], "pager");
    }

    #[test]
    fn the_driver_serves_what_reads_and_leaves_out_what_no_longer_holds() {
        let ok = props(json!({"retryPolicy": {"eventTimeToLiveInMinutes": 5}}));
        let (a, _) = Stored::create(ok.clone(), &sub(&ok, &[]), 7, "t0").unwrap();
        let gone_ref = props(json!({"signing": {"secretRef": "removed"}}));
        let b = Stored {
            properties: gone_ref,
            secrets: vec![],
            start_after: 0,
        };
        let bodies = vec![
            ("a".to_string(), Some(serde_json::to_string(&a).unwrap())),
            ("b".to_string(), Some(serde_json::to_string(&b).unwrap())),
            ("c".to_string(), Some("not json".to_string())),
        ];
        let served = active(&bodies, AddressPolicy::default(), &BTreeMap::new(), 0);
        assert_eq!(served.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(served["a"].start_after, 7);
        assert_eq!(served["a"].max_age_ms, 5 * 60_000);
        assert_eq!(served["a"].keys.len(), 1);
    }
}
