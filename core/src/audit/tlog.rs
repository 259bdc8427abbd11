//! The log as a transparency log: its records are the leaves of an
//! RFC 6962 Merkle tree (a leaf's data is the record's bytes as stored,
//! frame included), so that a tree head signed over them and the proofs
//! below are checked by any transparency-log tool (Go's `sumdb/tlog`
//! `CheckRecord` and `CheckTree`, Trillian's and Sigstore's clients)
//! without this crate.
//!
//! * A leaf's hash is SHA-256(0x00 ‖ data), a node's SHA-256(0x01 ‖ left ‖
//!   right); the tree of `n` leaves splits at the largest power of two
//!   below `n`, and the empty tree's hash is SHA-256 of nothing.
//! * [`TreeBuilder`] takes the leaves one by one and keeps one hash per
//!   level: the root of a log of any size in `O(log n)` memory.
//! * [`inclusion_proof`] and [`consistency_proof`] are RFC 6962's `PATH`
//!   and `PROOF`, over the leaf hashes; [`verify_inclusion`] and
//!   [`verify_consistency`] check them as RFC 9162 says a client does.

use sha2::{Digest, Sha256};

/// A SHA-256 hash: a leaf's, a node's, a tree's root.
pub type Hash = [u8; 32];

/// The hash of the tree with no leaf: SHA-256 of nothing.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// The hash of the leaf whose data is `data`: SHA-256(0x00 ‖ data).
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0x00]);
    hasher.update(data);
    hasher.finalize().into()
}

/// A leaf's hash over data that comes in pieces: the same as
/// [`leaf_hash`] over them all.
///
/// ```
/// use spillguard_core::audit::tlog::{LeafHasher, leaf_hash};
///
/// let mut hasher = LeafHasher::default();
/// hasher.update(b"rec");
/// hasher.update(b"ord");
/// assert_eq!(hasher.finish(), leaf_hash(b"record"));
/// ```
#[derive(Clone)]
pub struct LeafHasher(Sha256);

impl Default for LeafHasher {
    fn default() -> Self {
        let mut hasher = Sha256::new();
        hasher.update([0x00]);
        Self(hasher)
    }
}

impl std::fmt::Debug for LeafHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeafHasher")
    }
}

impl LeafHasher {
    /// Adds the next piece of the leaf's data.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The leaf's hash; the hasher starts a new leaf.
    pub fn finish(&mut self) -> Hash {
        std::mem::take(self).0.finalize().into()
    }
}

/// The hash of the node over `left` and `right`: SHA-256(0x01 ‖ left ‖
/// right).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0x01]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// The root of a tree whose leaves come one by one, in `O(log n)`
/// memory: the roots of its complete subtrees, largest first, one per bit
/// of the size.
///
/// ```
/// use spillguard_core::audit::tlog::{TreeBuilder, leaf_hash, node_hash};
///
/// let mut tree = TreeBuilder::default();
/// tree.push(leaf_hash(b"a"));
/// tree.push(leaf_hash(b"b"));
/// tree.push(leaf_hash(b"c"));
/// let ab = node_hash(&leaf_hash(b"a"), &leaf_hash(b"b"));
/// assert_eq!(tree.root(), node_hash(&ab, &leaf_hash(b"c")));
/// assert_eq!(tree.size(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeBuilder {
    /// The complete subtrees: (their leaf count, their root), largest
    /// (leftmost) first.
    subtrees: Vec<(u64, Hash)>,
    size: u64,
}

impl TreeBuilder {
    /// Adds the leaf whose hash is `leaf` (see [`leaf_hash`]).
    pub fn push(&mut self, leaf: Hash) {
        let mut node = (1u64, leaf);
        while let Some(&(size, left)) = self.subtrees.last() {
            if size != node.0 {
                break;
            }
            self.subtrees.pop();
            node = (size * 2, node_hash(&left, &node.1));
        }
        self.subtrees.push(node);
        self.size += 1;
    }

    /// How many leaves it holds.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The roots of its complete subtrees, largest (leftmost) first: one
    /// per bit set in [`size`](Self::size). With the size they are all a
    /// writer keeps to go on growing the tree (see
    /// [`from_subtree_roots`](Self::from_subtree_roots)).
    pub fn subtree_roots(&self) -> impl Iterator<Item = &Hash> {
        self.subtrees.iter().map(|(_, root)| root)
    }

    /// The tree of `size` leaves whose complete subtrees have the roots
    /// `roots` (largest first, as [`subtree_roots`](Self::subtree_roots)
    /// gives them), or `None` when their count is not the number of bits
    /// set in `size`.
    ///
    /// ```
    /// use spillguard_core::audit::tlog::{TreeBuilder, leaf_hash};
    ///
    /// let mut tree = TreeBuilder::default();
    /// (0u8..5).for_each(|i| tree.push(leaf_hash(&[i])));
    /// let roots: Vec<_> = tree.subtree_roots().copied().collect();
    /// let mut again = TreeBuilder::from_subtree_roots(5, &roots).unwrap();
    /// assert_eq!(again, tree);
    /// again.push(leaf_hash(&[5]));
    /// tree.push(leaf_hash(&[5]));
    /// assert_eq!(again.root(), tree.root());
    /// // 7 leaves make three complete subtrees, not two.
    /// assert!(TreeBuilder::from_subtree_roots(7, &roots).is_none());
    /// ```
    pub fn from_subtree_roots(size: u64, roots: &[Hash]) -> Option<TreeBuilder> {
        if roots.len() != size.count_ones() as usize {
            return None;
        }
        let sizes = (0..u64::BITS)
            .rev()
            .map(|bit| 1u64 << bit)
            .filter(|part| size & part != 0);
        Some(TreeBuilder {
            subtrees: sizes.zip(roots.iter().copied()).collect(),
            size,
        })
    }

    /// The tree's root hash (RFC 6962's `MTH`).
    pub fn root(&self) -> Hash {
        let mut subtrees = self.subtrees.iter().rev();
        match subtrees.next() {
            None => empty_root(),
            Some(&(_, last)) => subtrees.fold(last, |right, (_, left)| node_hash(left, &right)),
        }
    }
}

/// The leaf hashes of the records in `bytes`, which must start at a
/// record's first byte (as a log, or what follows an anchor's offset,
/// does): one per whole frame, in order, each over the frame's bytes as
/// stored. It stops at the first frame that is cut short or whose header
/// is damaged; verify the bytes first to know there is none.
///
/// ```
/// use spillguard_core::audit::tlog::{TreeBuilder, record_leaves};
/// use spillguard_core::audit::{LogEntry, LogId, LogWriter};
///
/// let mut writer = LogWriter::create(LogId([7; 16]), None);
/// let mut log = Vec::new();
/// for name in ["a", "b", "c"] {
///     let entry = LogEntry::Opened { writer: name.into() };
///     writer.append_to(&entry, None, &mut log).unwrap();
/// }
/// let mut tree = TreeBuilder::default();
/// record_leaves(&log).for_each(|leaf| tree.push(leaf));
/// assert_eq!(tree.size(), 3);
/// // A frame cut short is no leaf.
/// assert_eq!(record_leaves(&log[..log.len() - 1]).count(), 2);
/// ```
pub fn record_leaves(bytes: &[u8]) -> impl Iterator<Item = Hash> + '_ {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let super::frame::Header::Frame { total } = super::frame::read_header(rest) else {
            return None;
        };
        let frame = rest.get(..total)?;
        rest = &rest[total..];
        Some(leaf_hash(frame))
    })
}

/// The largest power of two below `n` (`n` at least 2): where a tree of
/// `n` leaves splits.
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// The root of the tree over `leaves` (their hashes), as RFC 6962
/// defines it: split at the largest power of two below the size, each
/// side's root, their node. [`TreeBuilder`] gives the same in less memory.
pub fn root(leaves: &[Hash]) -> Hash {
    match leaves {
        [] => empty_root(),
        [leaf] => *leaf,
        _ => {
            let k = split(leaves.len());
            node_hash(&root(&leaves[..k]), &root(&leaves[k..]))
        }
    }
}

/// The inclusion proof of leaf `index` in the tree over `leaves` (RFC
/// 6962's `PATH`): the hashes that, with the leaf's, give the root,
/// nearest the leaf first. `None` if `index` is past the tree.
pub fn inclusion_proof(leaves: &[Hash], index: usize) -> Option<Vec<Hash>> {
    if index >= leaves.len() {
        return None;
    }
    let mut proof = Vec::new();
    path(index, leaves, &mut proof);
    Some(proof)
}

fn path(m: usize, leaves: &[Hash], proof: &mut Vec<Hash>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    if m < k {
        path(m, &leaves[..k], proof);
        proof.push(root(&leaves[k..]));
    } else {
        path(m - k, &leaves[k..], proof);
        proof.push(root(&leaves[..k]));
    }
}

/// The consistency proof from the tree's first `old_size` leaves to the
/// whole tree over `leaves` (RFC 6962's `PROOF`): the hashes that show the
/// larger tree holds the smaller unchanged. Empty when `old_size` is 0 or
/// the whole tree; `None` if `old_size` is past it.
pub fn consistency_proof(leaves: &[Hash], old_size: usize) -> Option<Vec<Hash>> {
    if old_size > leaves.len() {
        return None;
    }
    let mut proof = Vec::new();
    if old_size > 0 {
        subproof(old_size, leaves, true, &mut proof);
    }
    Some(proof)
}

fn subproof(m: usize, leaves: &[Hash], whole: bool, proof: &mut Vec<Hash>) {
    let n = leaves.len();
    if m == n {
        if !whole {
            proof.push(root(leaves));
        }
        return;
    }
    let k = split(n);
    if m <= k {
        subproof(m, &leaves[..k], whole, proof);
        proof.push(root(&leaves[k..]));
    } else {
        subproof(m - k, &leaves[k..], false, proof);
        proof.push(root(&leaves[..k]));
    }
}

/// Whether `proof` shows the leaf whose hash is `leaf`, at `index`, in
/// the tree of `size` leaves whose root is `root` (RFC 9162, 2.1.3.2).
pub fn verify_inclusion(leaf: &Hash, index: u64, size: u64, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    s == 0 && r == *root
}

/// Whether `proof` shows the tree of `new_size` leaves whose root is
/// `new_root` holds, unchanged, the tree of its first `old_size` leaves
/// whose root is `old_root` (RFC 9162, 2.1.4.2).
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> bool {
    if old_size > new_size {
        return false;
    }
    if old_size == new_size {
        return proof.is_empty() && old_root == new_root;
    }
    if old_size == 0 {
        return proof.is_empty();
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if old_size.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let Some((&first, rest)) = path.split_first() else {
        return false;
    };
    let (mut f, mut s) = (old_size - 1, new_size - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (first, first);
    for c in rest {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    fr == *old_root && sr == *new_root && s == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(hash: &Hash) -> String {
        hash.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The leaves of RFC 6962's reference tests (certificate
    /// transparency's `merkle_tree_test`).
    fn reference_leaves() -> Vec<Hash> {
        let data: [&[u8]; 8] = [
            b"",
            b"\x00",
            b"\x10",
            b"\x20\x21",
            b"\x30\x31",
            b"\x40\x41\x42\x43",
            b"\x50\x51\x52\x53\x54\x55\x56\x57",
            b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
        ];
        data.iter().map(|d| leaf_hash(d)).collect()
    }

    #[test]
    fn the_roots_of_the_reference_trees_are_rfc_6962s() {
        let roots = [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
            "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
            "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
            "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        ];
        let leaves = reference_leaves();
        for (n, expected) in roots.iter().enumerate() {
            assert_eq!(hex(&root(&leaves[..=n])), *expected, "{} leaves", n + 1);
        }
        assert_eq!(
            hex(&empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    /// Leaves of trees of every size up to 70, each `i`'s data its
    /// number: every leaf's inclusion proof and every consistency proof
    /// verifies, and any changed hash, index or size fails.
    #[test]
    fn every_proof_of_trees_up_to_70_leaves_verifies_and_no_altered_one_does() {
        let all: Vec<Hash> = (0u32..70).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        for n in 1..=all.len() {
            let leaves = &all[..n];
            let top = root(leaves);
            let size = n as u64;
            for i in 0..n {
                let proof = inclusion_proof(leaves, i).unwrap();
                let index = i as u64;
                assert!(
                    verify_inclusion(&leaves[i], index, size, &proof, &top),
                    "{i} of {n}"
                );
                assert!(
                    !verify_inclusion(&leaves[(i + 1) % n], index, size, &proof, &top) || n == 1
                );
                // Past the tree: no proof.
                assert!(!verify_inclusion(&leaves[i], size, size, &proof, &top));
                if let Some(first) = proof.first() {
                    let mut bad = proof.clone();
                    bad[0] = node_hash(first, first);
                    assert!(!verify_inclusion(&leaves[i], index, size, &bad, &top));
                }
            }
            assert_eq!(inclusion_proof(leaves, n), None);
            for m in 0..=n {
                let proof = consistency_proof(leaves, m).unwrap();
                let old = root(&leaves[..m]);
                let old_size = m as u64;
                assert!(
                    verify_consistency(old_size, size, &old, &top, &proof),
                    "{m} to {n}"
                );
                if m > 0 && m < n {
                    let other = node_hash(&old, &old);
                    assert!(!verify_consistency(old_size, size, &other, &top, &proof));
                    assert!(!verify_consistency(old_size, size, &old, &other, &proof));
                    let mut bad = proof.clone();
                    let last = bad.len() - 1;
                    bad[last] = node_hash(&bad[last], &bad[last]);
                    assert!(!verify_consistency(old_size, size, &old, &top, &bad));
                }
            }
            assert_eq!(consistency_proof(leaves, n + 1), None);
        }
    }

    #[test]
    fn the_builder_gives_the_root_of_every_size_it_passes() {
        let all: Vec<Hash> = (0u32..100).map(|i| leaf_hash(&i.to_le_bytes())).collect();
        let mut tree = TreeBuilder::default();
        assert_eq!(tree.root(), empty_root());
        for (n, &leaf) in all.iter().enumerate() {
            tree.push(leaf);
            assert_eq!(tree.root(), root(&all[..=n]));
            // One hash per bit of the size, at most.
            assert_eq!(tree.subtrees.len(), (n + 1).count_ones() as usize);
        }
    }
}
