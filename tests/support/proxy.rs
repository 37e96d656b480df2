//! A TCP proxy between a client and ZooKeeper that can lose the reply to one create: it
//! forwards the create, swallows everything the server says until that reply has gone by,
//! then cuts the connection. The client reconnects through the proxy to the same session.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const OP_CREATE: i32 = 1;
const OP_CREATE2: i32 = 15;

pub struct LosingProxy {
    pub addr: String,
    armed: Arc<AtomicBool>,
    lost: watch::Receiver<bool>,
}

impl LosingProxy {
    /// Proxies to `upstream` (`host:port`); the first create whose path contains `marker` has
    /// its reply lost.
    pub async fn start(upstream: &str, marker: &'static [u8]) -> LosingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let armed = Arc::new(AtomicBool::new(true));
        let (lost_tx, lost) = watch::channel(false);
        let lost_tx = Arc::new(lost_tx);
        let upstream = upstream.to_owned();
        let armed2 = armed.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(pump(
                    client,
                    server,
                    armed2.clone(),
                    marker,
                    lost_tx.clone(),
                ));
            }
        });
        LosingProxy { addr, armed, lost }
    }

    /// Whether a reply has been lost yet.
    pub fn has_lost_a_reply(&self) -> bool {
        !self.armed.load(Ordering::SeqCst) && *self.lost.borrow()
    }
}

async fn read_frame(r: &mut OwnedReadHalf) -> Option<Vec<u8>> {
    let len = r.read_i32().await.ok()?;
    let mut buf = vec![0; len as usize];
    r.read_exact(&mut buf).await.ok()?;
    Some(buf)
}

async fn write_frame(w: &mut OwnedWriteHalf, frame: &[u8]) -> Option<()> {
    w.write_i32(frame.len() as i32).await.ok()?;
    w.write_all(frame).await.ok()
}

async fn pump(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<AtomicBool>,
    marker: &'static [u8],
    lost: Arc<watch::Sender<bool>>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    // The xid of the create whose reply is to be lost, once it has been forwarded.
    let (doomed_tx, mut doomed_rx) = watch::channel(None::<i32>);
    let up = async move {
        let connect = read_frame(&mut cr).await?;
        write_frame(&mut sw, &connect).await?;
        loop {
            let frame = read_frame(&mut cr).await?;
            let doomed = doomed_tx.borrow().is_some();
            if doomed {
                continue; // the connection is doomed: the server hears nothing more
            }
            let xid = i32::from_be_bytes(frame[0..4].try_into().unwrap());
            let op = i32::from_be_bytes(frame[4..8].try_into().unwrap());
            let is_target = (op == OP_CREATE || op == OP_CREATE2)
                && frame.windows(marker.len()).any(|w| w == marker);
            write_frame(&mut sw, &frame).await?;
            if is_target && armed.swap(false, Ordering::SeqCst) {
                doomed_tx.send_replace(Some(xid));
            }
        }
        #[allow(unreachable_code)]
        Some(())
    };
    let down = async move {
        let connect = read_frame(&mut sr).await?;
        write_frame(&mut cw, &connect).await?;
        loop {
            let frame = read_frame(&mut sr).await?;
            let doomed = *doomed_rx.borrow_and_update();
            match doomed {
                None => write_frame(&mut cw, &frame).await?,
                Some(xid) => {
                    let reply_xid = i32::from_be_bytes(frame[0..4].try_into().unwrap());
                    if reply_xid == xid {
                        lost.send_replace(true);
                        return Some(()); // drop both connections
                    }
                }
            }
        }
    };
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}
