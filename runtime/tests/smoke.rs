use runtime::net::{TcpListener, TcpStream};
use runtime::{Runtime, spawn, time};
use std::time::Duration;

#[test]
fn smoke_echo_spawn_sleep() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let server = spawn(async move {
            let (c, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 64];
            let n = c.read(&mut buf).await.unwrap();
            c.write_all(&buf[..n]).await.unwrap();
        });
        let c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 64];
        let n = c.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"hello");
        server.await.unwrap();
        time::sleep(Duration::from_millis(20)).await;
        assert!(time::timeout(Duration::from_millis(10), time::sleep(Duration::from_secs(5))).await.is_err());
    });
}
