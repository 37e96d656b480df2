//! `zkr`: ZooKeeper locks and elections from the shell (`lock`, `elect`), and who holds and
//! who waits (`inspect`, `watch`). Its own crate on the library's
//! public API and its [`layout`](zk_recipes::layout); see `zkr/README.md` and `zkr --help`.
//!
//! One concept per module: [`args`] (the command line), [`behind`] (whom a waiter waits behind), [`exit`] (exit codes and failures),
//! [`connect`] (the session), [`child`] (CMD in its process group), [`run`] (lock and elect:
//! acquire, run, stop on loss), [`observe`] (`elect --observe`), [`inspect`] (read, classify,
//! render), [`watch`] (`inspect` on every change), [`repair`] (an anchor in a lock space's
//! key), [`time`].
// The doc comments of `args.rs` are clap's help text (`host:port[/chroot]`), not rustdoc.
#![allow(rustdoc::broken_intra_doc_links)]

mod args;
mod behind;
mod child;
mod connect;
mod exit;
mod inspect;
mod observe;
mod repair;
mod run;
mod time;
mod watch;
mod watchdog;

use clap::Parser;

use args::{Cli, Command};

fn main() {
    // The watchdog of a running CMD (see `watchdog.rs`): this binary again, not a subcommand.
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("__watchdog") {
        watchdog::main(&argv[1..]);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version print to stdout and exit 0; errors exit 2, as one JSON
            // object when `--json` was asked for (before CMD's `--`).
            let json = argv
                .iter()
                .take_while(|a| *a != "--")
                .any(|a| a == "--json");
            if json && err.use_stderr() {
                let failure = exit::Failure::new(err.exit_code(), err.render().to_string().trim());
                eprintln!("{}", failure.json());
            } else {
                let _ = err.print();
            }
            std::process::exit(err.exit_code());
        }
    };
    init_logging(cli.zk.verbose);
    // One thread: CMD's parent-death signal follows the thread that started it, and this one
    // lives as long as the process.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("zkr: cannot start: {e}");
            std::process::exit(exit::ZOOKEEPER);
        }
    };
    let code = runtime.block_on(dispatch(cli));
    // The library's background tasks (a janitor, a supervisor) need not finish.
    runtime.shutdown_background();
    std::process::exit(code);
}

async fn dispatch(cli: Cli) -> i32 {
    let zk = &cli.zk;
    let json = match &cli.command {
        Command::Lock(args) => args.run.json,
        Command::Elect(args) => args.run.json,
        Command::Inspect(args) | Command::Watch(args) => args.json,
        Command::Repair(args) => args.json,
    };
    let result = match cli.command {
        Command::Lock(args) => run::lock(zk, args).await,
        Command::Elect(args) if args.observe => observe::observe(zk, &args).await,
        Command::Elect(args) => run::elect(zk, args).await,
        Command::Inspect(args) => inspect::inspect(zk, &args).await,
        Command::Watch(args) => watch::watch(zk, &args).await,
        Command::Repair(args) => repair::repair(zk, &args).await,
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            if json {
                eprintln!("{}", failure.json());
            } else if !failure.message.is_empty() {
                eprintln!("zkr: {}", failure.message);
            }
            failure.code
        }
    }
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => return,
        1 => "zk_recipes=info",
        _ => "zk_recipes=debug,zkr=debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("ZKR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
