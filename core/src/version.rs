//! Version arithmetic: Kubernetes `x.y.z` versions and node image versions.
//!
//! A node image version such as `AKSUbuntu-2204gen2containerd-202407.16.0` belongs to the *family*
//! before its last `-` and is ordered by the dotted numbers after it, segment by segment.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

/// A Kubernetes version `major.minor.patch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KubeVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
}

impl KubeVersion {
    /// Parses `x.y.z` (digits only, no leading `v`).
    pub fn parse(s: &str) -> Result<KubeVersion, String> {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() != 3 {
            return Err(format!("\"{s}\" is not a version of the form x.y.z"));
        }
        let mut n = [0u32; 3];
        for (i, p) in parts.iter().enumerate() {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 9 {
                return Err(format!("\"{s}\" is not a version of the form x.y.z"));
            }
            n[i] = p
                .parse()
                .map_err(|_| format!("\"{s}\" is not a version of the form x.y.z"))?;
        }
        Ok(KubeVersion {
            major: n[0],
            minor: n[1],
            patch: n[2],
        })
    }

    /// How many minor versions `target` is ahead of `self` (negative when behind; majors count as
    /// 1000 minors, which makes any major jump a skip).
    pub fn minors_until(&self, target: &KubeVersion) -> i64 {
        let a = self.major as i64 * 1000 + self.minor as i64;
        let b = target.major as i64 * 1000 + target.minor as i64;
        b - a
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The family of a node image version: everything before the last `-`.
pub fn image_family(version: &str) -> Option<&str> {
    let i = version.rfind('-')?;
    if i == 0 || i + 1 == version.len() {
        return None;
    }
    Some(&version[..i])
}

/// Checks that an image version has a family and a dotted numeric tail.
pub fn validate_image_version(version: &str) -> Result<(), String> {
    let Some(family) = image_family(version) else {
        return Err(format!(
            "\"{version}\" is not an image version of the form <family>-<numbers> (e.g. AKSUbuntu-2204gen2containerd-202407.16.0)"
        ));
    };
    let tail = &version[family.len() + 1..];
    if tail
        .split('.')
        .any(|seg| seg.is_empty() || !seg.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!(
            "\"{version}\": the part after the last '-' must be dot-separated numbers"
        ));
    }
    Ok(())
}

/// Compares two image versions of the same family segment by segment as numbers.
///
/// Segments compare as numbers of any length (leading zeros ignored); a version with more
/// segments is newer when all shared segments are equal.
pub fn compare_image_versions(a: &str, b: &str) -> Ordering {
    let ta = a.rsplit_once('-').map(|(_, t)| t).unwrap_or(a);
    let tb = b.rsplit_once('-').map(|(_, t)| t).unwrap_or(b);
    let mut ia = ta.split('.');
    let mut ib = tb.split('.');
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return a.cmp(b),
            (Some(_), None) => return Ordering::Greater,
            (None, Some(_)) => return Ordering::Less,
            (Some(x), Some(y)) => {
                let x = x.trim_start_matches('0');
                let y = y.trim_start_matches('0');
                let o = x.len().cmp(&y.len()).then_with(|| x.cmp(y));
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_versions_parse_and_order() {
        let a = KubeVersion::parse("1.30.4").unwrap();
        let b = KubeVersion::parse("1.31.2").unwrap();
        assert!(a < b);
        assert_eq!(a.minors_until(&b), 1);
        assert_eq!(b.to_string(), "1.31.2");
        assert!(KubeVersion::parse("1.30").is_err());
        assert!(KubeVersion::parse("v1.30.1").is_err());
        assert!(KubeVersion::parse("1.30.x").is_err());
    }

    #[test]
    fn image_family_is_everything_before_the_last_dash() {
        assert_eq!(
            image_family("AKSUbuntu-2204gen2containerd-202407.16.0"),
            Some("AKSUbuntu-2204gen2containerd")
        );
        assert_eq!(
            image_family("AKSWindows-2022-containerd-20348.2849.241105"),
            Some("AKSWindows-2022-containerd")
        );
        assert_eq!(image_family("nodash"), None);
        assert!(validate_image_version("AKSUbuntu-2204-20240716a").is_err());
    }

    #[test]
    fn image_versions_compare_numerically_segment_by_segment() {
        use Ordering::*;
        let f = |t: &str| format!("AKSUbuntu-2204gen2containerd-{t}");
        assert_eq!(
            compare_image_versions(&f("202411.03.0"), &f("202411.20.0")),
            Less
        );
        assert_eq!(
            compare_image_versions(&f("202412.01.0"), &f("202411.20.0")),
            Greater
        );
        assert_eq!(
            compare_image_versions(&f("202411.9.0"), &f("202411.10.0")),
            Less
        );
        assert_eq!(
            compare_image_versions(&f("202411.03.0"), &f("202411.3.0")),
            Equal.then(f("202411.03.0").cmp(&f("202411.3.0")))
        );
        assert_eq!(
            compare_image_versions(&f("202411.03"), &f("202411.03.1")),
            Less
        );
    }
}
