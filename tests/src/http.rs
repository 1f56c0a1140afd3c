//! A minimal HTTP/1.1 GET, enough for /metrics and health probes.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Returns the status code and body of `GET path` on 127.0.0.1:`port`.
pub async fn get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    get_at("127.0.0.1", port, path).await
}

/// Returns the status code and body of `GET path` on `host`:`port`.
pub async fn get_at(host: &str, port: u16, path: &str) -> std::io::Result<(u16, String)> {
    get_with(host, port, path, None).await
}

/// [`get`] over HTTPS (`tls.metrics.enable`), checking the server against `tls`.
pub async fn get_tls(
    port: u16,
    path: &str,
    tls: &security::tls::TlsClient,
) -> std::io::Result<(u16, String)> {
    get_with("127.0.0.1", port, path, Some(tls)).await
}

async fn get_with(
    host: &str,
    port: u16,
    path: &str,
    tls: Option<&security::tls::TlsClient>,
) -> std::io::Result<(u16, String)> {
    let fut = async {
        let tcp = TcpStream::connect((host, port)).await?;
        let mut stream = security::tls::connect(tls, tcp, &format!("{host}:{port}")).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        stream.flush().await?;
        let mut raw = Vec::new();
        if let Err(e) = stream.read_to_end(&mut raw).await {
            // A TLS peer that closes without close_notify still sent a whole answer.
            if raw.is_empty() || e.kind() != std::io::ErrorKind::UnexpectedEof {
                return Err(e);
            }
        }
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_owned()
        };
        Ok((status, body))
    };
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "HTTP GET timed out"))?
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}
