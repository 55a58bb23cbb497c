//! Shared by the tests that speak TLS: a test certificate authority and a server certificate
//! signed by it, made with the system's `openssl`.
#![allow(dead_code)] // each test file uses a part

use std::path::Path;
use std::process::Command;

pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate authority `NAME-ca.pem` and a server certificate for 127.0.0.1 and
/// localhost signed by it: `NAME-server.pem`, `NAME-server.key`.
pub fn test_ca(dir: &Path, name: &str) {
    let ca = format!("{name}-ca");
    let server = format!("{name}-server");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.pem"),
            "-days",
            "2",
            "-subj",
            &format!("/CN=waverun test CA {name}"),
        ],
    );
    std::fs::write(
        dir.join(format!("{server}.ext")),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{server}.key"),
            "-out",
            &format!("{server}.csr"),
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{server}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{server}.pem"),
            "-days",
            "2",
            "-extfile",
            &format!("{server}.ext"),
        ],
    );
}
