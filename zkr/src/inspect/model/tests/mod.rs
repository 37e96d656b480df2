//! The unit tests of `model`, by topic: the queues read from a snapshot (`queues`) and the
//! warnings they carry (`warnings`); here, the snapshot builders they share.

mod queues;
mod warnings;

use super::*;
use zk_recipes::layout::names;
use zk_recipes::layout::ANCHOR;

const NOW: i64 = 1_796_116_042_000;
const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

fn node(name: &str, sid: i64, data: &str, age_s: i64) -> Child {
    let seq = names::parse(name).map_or(0, |n| n.sequence);
    Child {
        name: name.to_owned(),
        stat: Stat {
            czxid: 0x1_0000_0000 + seq,
            ctime: NOW - age_s * 1000,
            ephemeral_owner: sid,
            ..Stat::default()
        },
        data: data.as_bytes().to_vec(),
        dir: None,
    }
}

fn ours(seq: i64, sid: i64, owner: &str) -> Child {
    node(
        &format!("lock-{seq:010}"),
        sid,
        &format!("id={UUID}\nowner={owner}\n"),
        100 - seq,
    )
}

fn anchor() -> Child {
    node(ANCHOR, 0, "", 1000)
}

/// A directory whose counter has seen `creates` child creates; an `anchor()` among
/// `children` becomes its anchor, as `read.rs` reads it.
fn dir(path: &str, creates: i32, children: Vec<Child>) -> Dir {
    let n = children.len() as i32;
    let (anchors, children): (Vec<Child>, Vec<Child>) =
        children.into_iter().partition(|c| c.name == ANCHOR);
    Dir {
        path: path.to_owned(),
        stat: Stat {
            cversion: creates.wrapping_mul(2).wrapping_sub(n),
            num_children: n,
            ..Stat::default()
        },
        data: Vec::new(),
        anchor: anchors.into_iter().next().map(|a| a.data),
        children,
        cut: None,
    }
}

fn sub(child_name: &str, d: Dir) -> Child {
    Child {
        name: child_name.to_owned(),
        dir: Some(d),
        ..Child::default()
    }
}

fn roles(q: &Queue) -> Vec<(&str, &str, Option<&str>)> {
    q.contenders
        .iter()
        .map(|c| (c.role, c.node.as_str(), c.waits_for.as_deref()))
        .collect()
}

fn kinds(q: &Queue) -> Vec<&str> {
    q.warnings.iter().map(|w| w.kind).collect()
}
