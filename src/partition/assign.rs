//! The assignment: which member owns which partition, a pure function of the sorted members
//! and the sorted partitions, so that every member computes the same split from the same
//! listing without talking to the others.
//!
//! # The rule: rendezvous hashing with bounded loads
//!
//! Every (member, partition) pair gets a score, `score(m, p)`: FNV-1a (64-bit) over the
//! member id's bytes, one `0xff` byte (no UTF-8 string contains it, so `("ab", "c")` and
//! `("a", "bc")` differ) and the partition's bytes, then the splitmix64 finalizer. Each member
//! may own at most `ceil(partitions / members)` partitions. Partitions are taken in sorted
//! order; each goes to the member with the highest score for it (ties: the smaller id) that
//! is not yet full.
//!
//! Why not kazoo's rule (`sorted(partitions)[i::n]` for the member at index `i` of the
//! sorted members): it is perfectly balanced, but a member joining or leaving shifts the
//! index of every member after it, so nearly every partition changes hands and every one
//! of them goes unowned for a moment during the rebalance. With rendezvous hashing a
//! partition moves only when its best member comes or goes (or a bound moves it): a member
//! leaving hands over about its own share, a member joining takes about one share, and the
//! bound keeps the loads within `ceil(partitions / members)`, as kazoo's are.

use std::collections::BTreeMap;

/// FNV-1a's offset basis and prime (64-bit).
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The score of `partition` for `member` (module docs).
pub(crate) fn score(member: &str, partition: &str) -> u64 {
    let mut h = FNV_OFFSET;
    let bytes = member
        .bytes()
        .chain(std::iter::once(0xff))
        .chain(partition.bytes());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    // splitmix64's finalizer: FNV's low bits alone mix poorly for short, similar strings.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Who owns each partition: `members` and `partitions` in any order, each without
/// duplicates (the caller's sets). Every partition gets exactly one owner when there is at
/// least one member; none when there is none.
pub(crate) fn assign<'a>(
    members: &[&'a str],
    partitions: &[&'a str],
) -> BTreeMap<&'a str, &'a str> {
    let mut members: Vec<&str> = members.to_vec();
    members.sort_unstable();
    members.dedup();
    let mut partitions: Vec<&str> = partitions.to_vec();
    partitions.sort_unstable();
    partitions.dedup();
    let mut owners = BTreeMap::new();
    if members.is_empty() {
        return owners;
    }
    let bound = partitions.len().div_ceil(members.len());
    let mut load: Vec<usize> = vec![0; members.len()];
    let mut ranked: Vec<(u64, usize)> = Vec::with_capacity(members.len());
    for p in partitions {
        ranked.clear();
        ranked.extend(members.iter().enumerate().map(|(i, m)| (score(m, p), i)));
        // Highest score first; among equal scores the smaller id (members are sorted).
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        // The bound leaves room for every partition: bound * members >= partitions.
        if let Some(&(_, i)) = ranked.iter().find(|(_, i)| load[*i] < bound) {
            load[i] += 1;
            owners.insert(p, members[i]);
        }
    }
    owners
}

/// The partitions `me` owns under [`assign`], sorted.
pub(crate) fn assigned_to<'a>(
    me: &str,
    members: &[&'a str],
    partitions: &[&'a str],
) -> Vec<&'a str> {
    assign(members, partitions)
        .into_iter()
        .filter(|(_, owner)| *owner == me)
        .map(|(p, _)| p)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    }

    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    #[test]
    fn every_partition_has_exactly_one_owner_within_the_bound() {
        let partitions = names("partition", 64);
        for n in 1..=12 {
            let members = names("worker", n);
            let owners = assign(&refs(&members), &refs(&partitions));
            assert_eq!(owners.len(), 64, "{n} members");
            let mut load: BTreeMap<&str, usize> = BTreeMap::new();
            for owner in owners.values() {
                *load.entry(owner).or_default() += 1;
            }
            let bound = 64usize.div_ceil(n);
            assert!(load.values().all(|&l| l <= bound), "{n} members: {load:?}");
            // The members' own views agree with the whole assignment.
            let total: usize = members
                .iter()
                .map(|m| assigned_to(m, &refs(&members), &refs(&partitions)).len())
                .sum();
            assert_eq!(total, 64);
        }
    }

    #[test]
    fn the_order_of_the_inputs_does_not_matter() {
        let partitions = names("p", 40);
        let members = names("m", 5);
        let a = assign(&refs(&members), &refs(&partitions));
        let mut m = refs(&members);
        let mut p = refs(&partitions);
        m.reverse();
        p.rotate_left(7);
        assert_eq!(assign(&m, &p), a);
    }

    #[test]
    fn a_member_leaving_or_joining_moves_few_partitions() {
        let partitions = names("partition", 64);
        let members = names("worker", 6);
        let before = assign(&refs(&members), &refs(&partitions));
        // One leaves: its own partitions move, and a few more that the bound shifts.
        let fewer: Vec<&str> = refs(&members)
            .into_iter()
            .filter(|m| *m != "worker-2")
            .collect();
        let after = assign(&fewer, &refs(&partitions));
        let moved = before.iter().filter(|(p, o)| after[*p] != **o).count();
        let own = before.values().filter(|o| **o == "worker-2").count();
        assert!(moved >= own);
        // kazoo's rule moves about 5/6 of them (53 of 64 here).
        assert!(
            moved <= own + 64 / 6,
            "moved {moved}, of which {own} its own"
        );
        // One joins: it takes its share, and few others move.
        let mut more = refs(&members);
        more.push("worker-6");
        let joined = assign(&more, &refs(&partitions));
        let moved = before.iter().filter(|(p, o)| joined[*p] != **o).count();
        let taken = joined.values().filter(|o| **o == "worker-6").count();
        // At least half a fair share, at most the bound.
        assert!(
            (64 / 14..=64usize.div_ceil(7)).contains(&taken),
            "took {taken}"
        );
        assert!(
            moved <= taken + 64 / 7,
            "moved {moved}, of which {taken} to the newcomer"
        );
    }

    #[test]
    fn no_members_no_owners_and_edge_cases() {
        assert!(assign(&[], &["a", "b"]).is_empty());
        assert!(assign(&["m"], &[]).is_empty());
        let one = assign(&["solo"], &["a", "b", "c"]);
        assert!(one.values().all(|o| *o == "solo"));
        // More members than partitions: each partition one owner, nobody two.
        let members = names("m", 10);
        let owners = assign(&refs(&members), &["x", "y", "z"]);
        assert_eq!(owners.len(), 3);
        let distinct: std::collections::BTreeSet<&&str> = owners.values().collect();
        assert_eq!(distinct.len(), 3);
    }

    #[test]
    fn scores_are_fixed_and_the_separator_tells_pairs_apart() {
        // Fixed across builds and platforms (other clients can implement the same rule).
        assert_eq!(score("a", "b"), score("a", "b"));
        assert_ne!(score("ab", "c"), score("a", "bc"));
        assert_eq!(score("", ""), {
            // FNV-1a of the single separator byte, then the finalizer.
            let mut h = (FNV_OFFSET ^ 0xff).wrapping_mul(FNV_PRIME);
            h ^= h >> 30;
            h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h ^= h >> 27;
            h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
            h ^ (h >> 31)
        });
    }
}
