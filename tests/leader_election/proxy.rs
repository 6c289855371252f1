//! A TCP pass-through to the API server that a test can cut, so one candidate loses the API
//! server (open connections closed, new ones refused) while the others keep it.
use std::net::SocketAddr;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct CuttableProxy {
    pub addr: SocketAddr,
    cut: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl CuttableProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> CuttableProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (cut, is_cut) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *is_cut.borrow() {
                    continue; // dropped: the connection is closed at once
                }
                tokio::spawn(forward(client, upstream, is_cut.clone()));
            }
        });
        CuttableProxy { addr, cut, task }
    }

    /// Closes every open connection and refuses new ones from now on.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// A client configuration like `config`, reaching the API server through this proxy.
    pub fn config(&self, mut config: kube::Config) -> kube::Config {
        config.cluster_url = format!("https://{}", self.addr).parse().expect("proxy URL");
        config
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

async fn forward(mut client: TcpStream, upstream: SocketAddr, mut is_cut: watch::Receiver<bool>) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    tokio::select! {
        _ = copy_bidirectional(&mut client, &mut server) => {}
        _ = is_cut.wait_for(|cut| *cut) => {}
    }
}
