//! Standard Webhooks signatures (<https://www.standardwebhooks.com/>, version 1): what a
//! delivery's `webhook-id`, `webhook-timestamp` and `webhook-signature` headers say, and the
//! signing secrets (`whsec_` and the base64 of 24 to 64 random bytes).
//!
//! The signed content is `{webhook-id}.{webhook-timestamp}.{body}`; each signature is
//! `v1,` and the base64 of its HMAC-SHA256 under one secret. During a rotation a delivery
//! carries one signature per secret, separated by spaces, so a receiver holding either secret
//! accepts it. [`verify`] is the receiver's side, for the daemon's own tests and for
//! `waverun eventsubscription verify`; receivers use the specification's libraries.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::hmac;
use std::fmt;

/// How a secret starts.
pub const SECRET_PREFIX: &str = "whsec_";
/// Secrets the daemon generates hold this many random bytes.
pub const GENERATED_BYTES: usize = 32;
/// The fewest and the most bytes a secret may hold (the specification's range).
pub const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;
/// How far a delivery's timestamp may be from the receiver's clock, as the specification's
/// libraries allow (5 minutes).
pub const TOLERANCE_SECONDS: i64 = 5 * 60;

/// A signing secret's key. Never shown: its `Debug` says only that it is there.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(Vec<u8>);

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({} bytes, redacted)", self.0.len())
    }
}

impl SigningKey {
    /// The key of a secret as it is written (`whsec_…`); the error says which rule it breaks
    /// and never repeats the secret.
    pub fn parse(secret: &str) -> Result<SigningKey, String> {
        let Some(b64) = secret.trim().strip_prefix(SECRET_PREFIX) else {
            return Err(format!(
                "a signing secret starts with {SECRET_PREFIX:?} followed by base64"
            ));
        };
        let bytes = STANDARD
            .decode(b64)
            .map_err(|_| format!("a signing secret is {SECRET_PREFIX:?} followed by base64, and what follows is not base64"))?;
        if !SECRET_BYTES.contains(&bytes.len()) {
            return Err(format!(
                "a signing secret holds {} to {} bytes, and this one holds {}",
                SECRET_BYTES.start(),
                SECRET_BYTES.end(),
                bytes.len()
            ));
        }
        Ok(SigningKey(bytes))
    }

    /// The secret as it is written and handed to a receiver: `whsec_` and base64.
    pub fn secret(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.0))
    }

    /// A new key of [`GENERATED_BYTES`] from the system's random source.
    pub fn generate() -> Result<SigningKey, String> {
        use ring::rand::SecureRandom;
        let mut bytes = vec![0u8; GENERATED_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| "the system's random source failed".to_string())?;
        Ok(SigningKey(bytes))
    }

    /// `v1,` and the base64 of the HMAC-SHA256 of `{id}.{timestamp}.{body}`.
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.0);
        let mut ctx = hmac::Context::with_key(&key);
        ctx.update(id.as_bytes());
        ctx.update(b".");
        ctx.update(timestamp.to_string().as_bytes());
        ctx.update(b".");
        ctx.update(body);
        format!("v1,{}", STANDARD.encode(ctx.sign().as_ref()))
    }
}

/// The three headers of one delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `webhook-id`: the same for every attempt at one event, so receivers deduplicate.
    pub id: String,
    /// `webhook-timestamp`: when this attempt was signed, in seconds since the Unix epoch.
    pub timestamp: i64,
    /// `webhook-signature`: one `v1,…` per key, separated by spaces.
    pub signature: String,
}

impl SignedHeaders {
    /// The headers as (name, value) pairs.
    pub fn pairs(&self) -> [(&'static str, String); 3] {
        [
            ("webhook-id", self.id.clone()),
            ("webhook-timestamp", self.timestamp.to_string()),
            ("webhook-signature", self.signature.clone()),
        ]
    }
}

/// Signs `body` as the delivery `id` at `timestamp` (seconds) under each of `keys`, in their
/// order (the newest secret first during a rotation).
pub fn sign(keys: &[SigningKey], id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
    let signature = keys
        .iter()
        .map(|k| k.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ");
    SignedHeaders {
        id: id.to_string(),
        timestamp,
        signature,
    }
}

/// Why a delivery was not accepted by [`verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// The timestamp is further than [`TOLERANCE_SECONDS`] from now.
    Timestamp,
    /// No signature matches any key.
    NoMatch,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Timestamp => write!(
                f,
                "webhook-timestamp is more than {TOLERANCE_SECONDS} s from now"
            ),
            VerifyError::NoMatch => {
                f.write_str("no v1 signature in webhook-signature matches the secret")
            }
        }
    }
}

/// The receiver's check: the timestamp within [`TOLERANCE_SECONDS`] of `now` (seconds), and
/// one of the `v1` signatures made with `key`, compared in constant time.
pub fn verify(
    key: &SigningKey,
    headers: &SignedHeaders,
    body: &[u8],
    now: i64,
) -> Result<(), VerifyError> {
    if (now - headers.timestamp).abs() > TOLERANCE_SECONDS {
        return Err(VerifyError::Timestamp);
    }
    let hkey = hmac::Key::new(hmac::HMAC_SHA256, &key.0);
    let mut content = Vec::with_capacity(headers.id.len() + body.len() + 24);
    content.extend_from_slice(headers.id.as_bytes());
    content.push(b'.');
    content.extend_from_slice(headers.timestamp.to_string().as_bytes());
    content.push(b'.');
    content.extend_from_slice(body);
    let matches = headers.signature.split(' ').any(|sig| {
        sig.strip_prefix("v1,")
            .and_then(|b64| STANDARD.decode(b64).ok())
            .is_some_and(|tag| hmac::verify(&hkey, &content, &tag).is_ok())
    });
    if matches {
        Ok(())
    } else {
        Err(VerifyError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const VECTOR_TIMESTAMP: i64 = 1_614_265_330;
    const VECTOR_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const VECTOR_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    /// The vector's key, and its body signed with it.
    fn vector() -> (SigningKey, SignedHeaders) {
        let key = SigningKey::parse(VECTOR_SECRET).unwrap();
        let h = sign(
            std::slice::from_ref(&key),
            VECTOR_ID,
            VECTOR_TIMESTAMP,
            VECTOR_BODY,
        );
        (key, h)
    }

    #[test]
    fn the_specifications_test_vector_is_reproduced_and_verified() {
        let (key, h) = vector();
        assert_eq!(h.signature, VECTOR_SIGNATURE);
        assert_eq!(verify(&key, &h, VECTOR_BODY, VECTOR_TIMESTAMP + 10), Ok(()));
        assert_eq!(key.secret(), VECTOR_SECRET);
    }

    #[test]
    fn an_altered_body_id_or_timestamp_is_refused() {
        let (key, h) = vector();
        let now = VECTOR_TIMESTAMP;
        assert_eq!(
            verify(&key, &h, br#"{"test": 2432232315}"#, now),
            Err(VerifyError::NoMatch)
        );
        let other_id = SignedHeaders {
            id: "msg_other".into(),
            ..h.clone()
        };
        assert_eq!(
            verify(&key, &other_id, VECTOR_BODY, now),
            Err(VerifyError::NoMatch)
        );
        let moved = SignedHeaders {
            timestamp: h.timestamp + 1,
            ..h.clone()
        };
        assert_eq!(
            verify(&key, &moved, VECTOR_BODY, now),
            Err(VerifyError::NoMatch)
        );
        assert_eq!(
            verify(&key, &h, VECTOR_BODY, now + TOLERANCE_SECONDS + 1),
            Err(VerifyError::Timestamp)
        );
        assert_eq!(
            verify(&key, &h, VECTOR_BODY, now - TOLERANCE_SECONDS - 1),
            Err(VerifyError::Timestamp)
        );
    }

    #[test]
    fn during_a_rotation_either_secret_verifies_the_delivery() {
        let old = SigningKey::parse(VECTOR_SECRET).unwrap();
        let new = SigningKey::generate().unwrap();
        let h = sign(&[new.clone(), old.clone()], "msg_1", 1_700_000_000, b"{}");
        let sigs: Vec<&str> = h.signature.split(' ').collect();
        assert_eq!(sigs.len(), 2);
        assert!(sigs.iter().all(|s| s.starts_with("v1,")));
        assert_eq!(verify(&new, &h, b"{}", 1_700_000_000), Ok(()));
        assert_eq!(verify(&old, &h, b"{}", 1_700_000_000), Ok(()));
        let stranger = SigningKey::generate().unwrap();
        assert_eq!(
            verify(&stranger, &h, b"{}", 1_700_000_000),
            Err(VerifyError::NoMatch)
        );
    }

    #[test]
    fn generated_secrets_are_fresh_and_read_back() {
        let a = SigningKey::generate().unwrap();
        let b = SigningKey::generate().unwrap();
        assert_ne!(a, b);
        assert!(a.secret().starts_with(SECRET_PREFIX));
        assert_eq!(SigningKey::parse(&a.secret()).unwrap(), a);
        assert_eq!(a.0.len(), GENERATED_BYTES);
    }

    #[test]
    fn a_malformed_secret_is_refused_with_the_rule_and_never_repeated() {
        for (secret, rule) in [
            ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "starts with \"whsec_\""),
            ("whsec_not base64!", "is not base64"),
            (
                "whsec_c2hvcnQ=",
                "holds 24 to 64 bytes, and this one holds 5",
            ),
        ] {
            let e = SigningKey::parse(secret).unwrap_err();
            assert!(e.contains(rule), "{secret}: {e}");
            assert!(!e.contains(secret), "{e} repeats the secret");
        }
        let key = SigningKey::parse(VECTOR_SECRET).unwrap();
        assert!(!format!("{key:?}").contains("MfKQ"));
    }
}
