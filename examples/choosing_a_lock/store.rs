//! The store every lock kind protects: one PostgreSQL table of counters (an account's balance
//! in the pause incident, a product's stock in the flash sale), with a `fence` column (the
//! highest token accepted) and a `version` column (the optimistic kind's), and an `orders`
//! table with one row per accepted debit (so oversold seats are `orders - stock`).

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{Client, NoTls};

/// Opens one connection (its driver runs on a task of its own).
pub async fn connect(conninfo: &str) -> Result<Client, String> {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .map_err(|e| format!("postgres: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Creates the tables if needed.
pub async fn create_schema(client: &Client) -> Result<(), String> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS stock (
                 id      TEXT PRIMARY KEY,
                 value   BIGINT NOT NULL,
                 fence   BIGINT NOT NULL DEFAULT 0,
                 version BIGINT NOT NULL DEFAULT 0
             );
             CREATE TABLE IF NOT EXISTS orders (
                 seq    BIGSERIAL PRIMARY KEY,
                 item   TEXT NOT NULL,
                 buyer  TEXT NOT NULL,
                 amount BIGINT NOT NULL,
                 token  BIGINT
             );",
        )
        .await
        .map_err(|e| format!("schema: {e}"))
}

/// Adds the row `id` with `value` (fence and version 0).
pub async fn create_item(client: &Client, id: &str, value: i64) -> Result<(), String> {
    client
        .execute(
            "INSERT INTO stock (id, value) VALUES ($1, $2)",
            &[&id, &value],
        )
        .await
        .map_err(|e| format!("create {id}: {e}"))?;
    Ok(())
}

/// The row's value and how many orders it took.
pub async fn tally(client: &Client, id: &str) -> Result<(i64, i64), String> {
    let row = client
        .query_one(
            "SELECT s.value, (SELECT count(*) FROM orders o WHERE o.item = s.id)
               FROM stock s WHERE s.id = $1",
            &[&id],
        )
        .await
        .map_err(|e| format!("tally {id}: {e}"))?;
    Ok((row.get(0), row.get(1)))
}

/// A fixed set of connections handed out one at a time (a transaction needs one to itself).
#[derive(Clone)]
pub struct Pool {
    free: Arc<Mutex<Vec<Client>>>,
    permits: Arc<Semaphore>,
}

/// A connection taken from the pool; goes back when dropped (unless it broke).
pub struct Pooled {
    client: Option<Client>,
    pool: Pool,
    _permit: OwnedSemaphorePermit,
}

impl Pool {
    pub async fn new(conninfo: &str, size: usize) -> Result<Pool, String> {
        let mut clients = Vec::new();
        for _ in 0..size {
            clients.push(connect(conninfo).await?);
        }
        Ok(Pool {
            free: Arc::new(Mutex::new(clients)),
            permits: Arc::new(Semaphore::new(size)),
        })
    }

    pub async fn get(&self, conninfo: &str) -> Result<Pooled, String> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let taken = self.free.lock().unwrap().pop();
        let client = match taken {
            Some(c) if !c.is_closed() => c,
            // A connection the server ended (an idle-in-transaction timeout): open another.
            _ => connect(conninfo).await?,
        };
        Ok(Pooled {
            client: Some(client),
            pool: self.clone(),
            _permit: permit,
        })
    }
}

impl std::ops::Deref for Pooled {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("until dropped")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            self.pool.free.lock().unwrap().push(c);
        }
    }
}
