//! ZooKeeper 3.8's data tree (`DataTree`): the znodes, their data, ACLs and metadata, the
//! index of ephemeral nodes by session and of containers and TTL nodes, and every rule a write
//! obeys — ZooKeeper checks those rules in the leader's `PrepRequestProcessor` and applies the
//! resulting transaction in `DataTree.processTxn`; here [`DataTree::apply_op`] does both, in
//! ZooKeeper's order, when a committed transaction is applied (so every server decides alike).
//!
//! What a client sees is ZooKeeper's: a node's `cversion` is stored as the number of children
//! ever created and reported as `2 * created - numChildren` (creates plus deletes, as
//! `DataNode.copyStat`), so a fresh server's `/` shows `cversion = -1`; the sequence suffix of
//! a sequential node is the stored count (`%010d`); containers and TTL nodes report
//! `ephemeralOwner = 0`.
//!
//! Not modelled: quotas (`/zookeeper/quota/...` nodes are ordinary nodes here; ZooKeeper 3.8
//! only enforces quotas with `zookeeper.enforceQuota`, off by default, but keeps its
//! `zookeeper_stats` nodes up to date), the tree digest, and `reconfig`'s writes of
//! `/zookeeper/config`. TTL nodes are accepted without ZooKeeper's
//! `zookeeper.extendedTypesEnabled` system property (without it ZooKeeper answers
//! `createTTL` with `Unimplemented`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use base64::Engine as _;
use sha1::{Digest as _, Sha1};
use thiserror::Error;

use super::txn::{Reader, TxnError, TxnOp, Writer};
use super::types::{perms, Acl, CreateMode, ErrorCode, EventType, Id, Stat};

/// The largest TTL in ms (`EphemeralType.TTL.maxValue()`: 2^40 - 1, about 34 years).
pub const TTL_MAX_MS: i64 = (1 << 40) - 1;

/// The version byte at the front of an encoded tree.
pub const TREE_VERSION: u8 = 1;

/// What a successful write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpOutcome {
    /// A node was created at `path` (with its sequence suffix).
    Created {
        /// The created path.
        path: String,
        /// The new node's stat.
        stat: Stat,
    },
    /// A node was deleted.
    Deleted,
    /// The data was set.
    SetData {
        /// The node's new stat.
        stat: Stat,
    },
    /// The ACL was set.
    SetAcl {
        /// The node's new stat.
        stat: Stat,
    },
    /// A `check` held.
    Checked,
}

/// Why bytes are not a [`DataTree`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TreeError {
    /// A field could not be read.
    #[error("malformed tree: {0}")]
    Malformed(#[from] TxnError),
    /// The version byte is not [`TREE_VERSION`].
    #[error("unknown tree encoding version {0}")]
    UnknownVersion(u8),
    /// The first node is not `/`.
    #[error("the tree does not start with /")]
    NoRoot,
    /// A node comes before its parent (or has none).
    #[error("node {0} has no parent")]
    MissingParent(String),
    /// A path appears twice.
    #[error("node {0} appears twice")]
    DuplicatePath(String),
    /// A path ZooKeeper would refuse.
    #[error("invalid path {0:?}")]
    BadPath(String),
    /// A node names an ACL that is not in the table.
    #[error("ACL index {0} out of range")]
    BadAclIndex(u32),
    /// An unknown node kind.
    #[error("unknown node kind {0}")]
    UnknownKind(u8),
}

/// What a node is, in ZooKeeper's terms its `EphemeralType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `VOID`: a persistent node.
    Persistent,
    /// `NORMAL`: owned by a session.
    Ephemeral(i64),
    /// `CONTAINER`.
    Container,
    /// `TTL`, with its TTL in ms.
    Ttl(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    data: Box<[u8]>,
    acl: Arc<[Acl]>,
    czxid: i64,
    mzxid: i64,
    ctime: i64,
    mtime: i64,
    version: i32,
    /// Children ever created (ZooKeeper's persisted `cversion`).
    cversion: i32,
    aversion: i32,
    pzxid: i64,
    kind: Kind,
    children: BTreeSet<Box<str>>,
}

impl Node {
    fn empty(acl: Arc<[Acl]>) -> Node {
        Node {
            data: Box::new([]),
            acl,
            czxid: 0,
            mzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            pzxid: 0,
            kind: Kind::Persistent,
            children: BTreeSet::new(),
        }
    }

    /// The stat a client sees (`DataNode.copyStat`).
    fn stat(&self) -> Stat {
        let num_children = i32::try_from(self.children.len()).unwrap_or(i32::MAX);
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion.wrapping_mul(2).wrapping_sub(num_children),
            aversion: self.aversion,
            ephemeral_owner: match self.kind {
                Kind::Ephemeral(owner) => owner,
                _ => 0,
            },
            data_length: i32::try_from(self.data.len()).unwrap_or(i32::MAX),
            num_children,
            pzxid: self.pzxid,
        }
    }
}

/// How to undo one applied op of a `multi` that fails later.
#[derive(Debug)]
enum Undo {
    Created {
        path: String,
        parent: String,
        parent_cversion: i32,
        parent_pzxid: i64,
    },
    Deleted {
        path: String,
        node: Node,
        parent: String,
        parent_pzxid: i64,
    },
    DataSet {
        path: String,
        data: Box<[u8]>,
        mzxid: i64,
        mtime: i64,
        version: i32,
    },
    AclSet {
        path: String,
        acl: Arc<[Acl]>,
        aversion: i32,
    },
}

/// ZooKeeper's data tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataTree {
    /// Boxed nodes keep the map's slots small: its spare capacity costs 24 bytes a slot.
    nodes: HashMap<Box<str>, Box<Node>>,
    /// Every distinct ACL list, shared by the nodes that carry it (ZooKeeper's
    /// `ReferenceCountedACLCache`).
    acls: HashSet<Arc<[Acl]>>,
    ephemerals: BTreeMap<i64, BTreeSet<String>>,
    containers: BTreeSet<String>,
    ttls: BTreeSet<String>,
    /// Sum of path (in UTF-16 units) and data lengths (`approximateDataSize`).
    data_size: i64,
    last_processed_zxid: i64,
}

impl Default for DataTree {
    fn default() -> Self {
        Self::new()
    }
}

/// The parent's key and the child's name of `path` (the parent of `/x` is `/`).
fn split_parent(path: &str) -> Option<(&str, &str)> {
    let slash = path.rfind('/')?;
    let parent = if slash == 0 { "/" } else { &path[..slash] };
    Some((parent, &path[slash + 1..]))
}

/// `DataTree.getNodeSize`: the path's length in Java characters (UTF-16 units) plus the
/// data's in bytes.
fn node_size(path: &str, data: &[u8]) -> i64 {
    (path.encode_utf16().count() + data.len()) as i64
}

/// ZooKeeper's `isSpecialPath`: the nodes of a fresh tree, which cannot be deleted.
fn is_special(path: &str) -> bool {
    matches!(
        path,
        "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
    )
}

fn check_version(current: i32, expected: i32) -> Result<i32, ErrorCode> {
    if expected != -1 && expected != current {
        return Err(ErrorCode::BadVersion);
    }
    Ok(current.wrapping_add(1))
}

/// ZooKeeper's `PathUtils.validatePath`: `BadArguments` for an empty path, one not starting
/// with `/`, ending with `/` (except `/`), with an empty segment, a `.` or `..` segment, a
/// NUL, a control character (U+0001–U+001F, U+007F–U+009F), a character Java sees as a
/// surrogate or in U+E000–U+F8FF (so any character outside the BMP), or U+FFF0–U+FFFF.
pub fn validate_path(path: &str) -> Result<(), ErrorCode> {
    let chars: Vec<u16> = path.encode_utf16().collect();
    if chars.first() != Some(&u16::from(b'/')) {
        return Err(ErrorCode::BadArguments);
    }
    if chars.len() == 1 {
        return Ok(());
    }
    let slash = u16::from(b'/');
    let dot = u16::from(b'.');
    if chars[chars.len() - 1] == slash {
        return Err(ErrorCode::BadArguments);
    }
    let mut last = slash;
    for i in 1..chars.len() {
        let c = chars[i];
        let ends_segment = i + 1 == chars.len() || chars[i + 1] == slash;
        let bad = if c == 0 || (c == slash && last == slash) {
            true
        } else if c == dot && last == dot {
            chars[i - 2] == slash && ends_segment
        } else if c == dot {
            chars[i - 1] == slash && ends_segment
        } else {
            (0x0001..=0x001f).contains(&c)
                || (0x007f..=0x009f).contains(&c)
                || (0xd800..=0xf8ff).contains(&c)
                || (0xfff0..=0xffff).contains(&c)
        };
        if bad {
            return Err(ErrorCode::BadArguments);
        }
        last = c;
    }
    Ok(())
}

/// ZooKeeper's digest id of `user:password` (`DigestAuthenticationProvider.generateDigest`):
/// `digest:user:base64(sha1("user:password"))`, the user being everything before the first
/// `:`. ZooKeeper accepts any string (one without `:` gives `digest:string:hash`), so this
/// always answers `Some`.
pub fn digest_id(user_password: &str) -> Option<Id> {
    let user = user_password.split(':').next().unwrap_or("");
    let hash = Sha1::digest(user_password.as_bytes());
    let b64 = base64::engine::general_purpose::STANDARD.encode(hash);
    Some(Id::new("digest", format!("{user}:{b64}")))
}

/// Java's `String.split(sep)`: trailing empty strings removed.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    if parts == [""] && !s.is_empty() {
        parts.clear();
    }
    parts
}

/// `IPAuthenticationProvider.addr2Bytes` (IPv4 only, as ZooKeeper 3.8).
fn ipv4_bytes(addr: &str) -> Option<[u8; 4]> {
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut b = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        // Java's Integer.parseInt: an optional sign, then digits.
        let v: i64 = p.parse().ok()?;
        b[i] = u8::try_from(v).ok()?;
    }
    Some(b)
}

/// `IPAuthenticationProvider.isValid`: `a.b.c.d` or `a.b.c.d/bits` with bits in 0..=32.
fn ip_valid(id: &str) -> bool {
    let mut parts = id.splitn(2, '/');
    let addr = parts.next().unwrap_or("");
    if ipv4_bytes(addr).is_none() {
        return false;
    }
    match parts.next() {
        None => true,
        Some(bits) => matches!(bits.parse::<i32>(), Ok(b) if (0..=32).contains(&b)),
    }
}

/// `IPAuthenticationProvider.matches`: the client's address `id` is in the ACL's network.
fn ip_matches(id: &str, acl_expr: &str) -> bool {
    let mut parts = acl_expr.splitn(2, '/');
    let Some(acl_addr) = ipv4_bytes(parts.next().unwrap_or("")) else {
        return false;
    };
    let bits = match parts.next() {
        None => 32,
        Some(b) => match b.parse::<i32>() {
            Ok(b) if (0..=32).contains(&b) => b as u32,
            _ => return false,
        },
    };
    let Some(remote) = ipv4_bytes(id) else {
        return false;
    };
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    (u32::from_be_bytes(acl_addr) & mask) == (u32::from_be_bytes(remote) & mask)
}

/// ZooKeeper's `PrepRequestProcessor.fixupACL`: duplicates removed (first kept), then every
/// entry checked and `auth:` expanded. `InvalidAcl` for an empty list, a `world` id other
/// than `anyone`, an `auth:` entry when the session has no authenticated id (`digest`, the
/// only authenticated scheme ZooKeeper registers by default; `ip` ids are not), an invalid
/// `digest` id (not exactly `user:hash` by Java's `split(":")`), an invalid `ip` id, or any
/// other scheme (no provider).
pub fn fixup_acl(acl: &[Acl], auth: &[Id]) -> Result<Vec<Acl>, ErrorCode> {
    let mut unique: Vec<&Acl> = Vec::with_capacity(acl.len());
    for a in acl {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    if unique.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let mut out = Vec::with_capacity(unique.len());
    for a in unique {
        match a.id.scheme.as_str() {
            "world" if a.id.id == "anyone" => out.push(a.clone()),
            "auth" => {
                let mut any = false;
                for id in auth.iter().filter(|id| id.scheme == "digest") {
                    any = true;
                    out.push(Acl {
                        perms: a.perms,
                        id: id.clone(),
                    });
                }
                if !any {
                    return Err(ErrorCode::InvalidAcl);
                }
            }
            "digest" if java_split(&a.id.id, ':').len() == 2 => out.push(a.clone()),
            "ip" if ip_valid(&a.id.id) => out.push(a.clone()),
            _ => return Err(ErrorCode::InvalidAcl),
        }
    }
    Ok(out)
}

/// ZooKeeper's `ZooKeeperServer.checkACL` on an ACL list: allowed when the list is empty,
/// when `auth` holds a `super` id, or when an entry granting `perm` is `world:anyone`, a
/// `digest` id equal to one of `auth`'s, or an `ip` network holding one of `auth`'s `ip`
/// ids; else `NoAuth`.
pub fn check_acl_list(acl: &[Acl], perm: i32, auth: &[Id]) -> Result<(), ErrorCode> {
    if acl.is_empty() || auth.iter().any(|id| id.scheme == "super") {
        return Ok(());
    }
    for a in acl.iter().filter(|a| a.perms & perm != 0) {
        let ok = match a.id.scheme.as_str() {
            "world" => a.id.id == "anyone",
            "digest" => auth
                .iter()
                .any(|id| id.scheme == "digest" && id.id == a.id.id),
            "ip" => auth
                .iter()
                .any(|id| id.scheme == "ip" && ip_matches(&id.id, &a.id.id)),
            _ => false,
        };
        if ok {
            return Ok(());
        }
    }
    Err(ErrorCode::NoAuth)
}

impl DataTree {
    /// ZooKeeper 3.8's fresh tree: `/` with the child `zookeeper`, `/zookeeper` with `quota`
    /// and `config`, every stat zero; all `world:anyone` with every permission except
    /// `/zookeeper/config`, which is `world:anyone` read-only with `aversion = -1` (ZooKeeper
    /// sets its ACL with version -1, ZOOKEEPER-2014).
    pub fn new() -> DataTree {
        let mut tree = DataTree {
            nodes: HashMap::new(),
            acls: HashSet::new(),
            ephemerals: BTreeMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            data_size: 0,
            last_processed_zxid: 0,
        };
        let open = tree.intern(&Acl::open_unsafe());
        let read_only = tree.intern(&[Acl {
            perms: perms::READ,
            id: Id::anyone(),
        }]);
        tree.data_size = 1;
        tree.nodes
            .insert("/".into(), Box::new(Node::empty(open.clone())));
        tree.insert_raw("/zookeeper".into(), Node::empty(open.clone()));
        tree.insert_raw("/zookeeper/quota".into(), Node::empty(open));
        let mut config = Node::empty(read_only);
        config.aversion = -1;
        tree.insert_raw("/zookeeper/config".into(), config);
        tree
    }

    fn intern(&mut self, acl: &[Acl]) -> Arc<[Acl]> {
        if let Some(a) = self.acls.get(acl) {
            return a.clone();
        }
        let a: Arc<[Acl]> = Arc::from(acl);
        self.acls.insert(a.clone());
        a
    }

    /// Drops a node's reference to `acl`: the last user's drop removes it from the cache.
    fn release(&mut self, acl: Arc<[Acl]>) {
        // The cache's reference and `acl` itself.
        if Arc::strong_count(&acl) <= 2 {
            self.acls.remove(&*acl);
        }
    }

    /// Inserts `node` at `path` under its (existing) parent and indexes it.
    fn insert_raw(&mut self, path: String, node: Node) {
        if let Some((parent, name)) = split_parent(&path) {
            if let Some(p) = self.nodes.get_mut(parent) {
                p.children.insert(name.into());
            }
        }
        match node.kind {
            Kind::Ephemeral(owner) => {
                self.ephemerals
                    .entry(owner)
                    .or_default()
                    .insert(path.clone());
            }
            Kind::Container => {
                self.containers.insert(path.clone());
            }
            Kind::Ttl(_) => {
                self.ttls.insert(path.clone());
            }
            Kind::Persistent => {}
        }
        self.data_size += node_size(&path, &node.data);
        self.nodes.insert(path.into_boxed_str(), Box::new(node));
    }

    /// Removes the node at `path` from its parent and the indexes (its ACL reference stays
    /// with the returned node).
    fn remove_raw(&mut self, path: &str) -> Option<Node> {
        let node = *self.nodes.remove(path)?;
        if let Some((parent, name)) = split_parent(path) {
            if let Some(p) = self.nodes.get_mut(parent) {
                p.children.remove(name);
            }
        }
        match node.kind {
            Kind::Ephemeral(owner) => {
                if let Some(set) = self.ephemerals.get_mut(&owner) {
                    set.remove(path);
                    if set.is_empty() {
                        self.ephemerals.remove(&owner);
                    }
                }
            }
            Kind::Container => {
                self.containers.remove(path);
            }
            Kind::Ttl(_) => {
                self.ttls.remove(path);
            }
            Kind::Persistent => {}
        }
        self.data_size -= node_size(path, &node.data);
        Some(node)
    }

    // ---- reads ----

    /// The node's data and stat (`getData`).
    pub fn get_data(&self, path: &str) -> Option<(&[u8], Stat)> {
        self.nodes.get(path).map(|n| (&n.data[..], n.stat()))
    }

    /// The node's stat (`exists`).
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.nodes.get(path).map(|n| n.stat())
    }

    /// The names of the node's children, sorted (`getChildren`; ZooKeeper's order is its
    /// hash set's).
    pub fn children(&self, path: &str) -> Option<Vec<String>> {
        self.nodes
            .get(path)
            .map(|n| n.children.iter().map(|c| c.to_string()).collect())
    }

    /// The node's ACL and stat (`getACL`).
    pub fn get_acl(&self, path: &str) -> Option<(Vec<Acl>, Stat)> {
        self.nodes.get(path).map(|n| (n.acl.to_vec(), n.stat()))
    }

    /// The number of the node's descendants (`getAllChildrenNumber`): for `/` every node but
    /// the root (so 3 on a fresh tree: `/zookeeper` and its two children).
    pub fn all_children_number(&self, path: &str) -> Option<i32> {
        self.nodes.get(path)?;
        let n = if path == "/" {
            self.nodes.len() - 1
        } else {
            let prefix = format!("{path}/");
            self.nodes.keys().filter(|k| k.starts_with(&prefix)).count()
        };
        Some(i32::try_from(n).unwrap_or(i32::MAX))
    }

    /// The paths of `session`'s ephemeral nodes, sorted.
    pub fn ephemerals(&self, session: i64) -> Vec<String> {
        self.ephemerals
            .get(&session)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// `getEphemerals(prefixPath)` as `FinalRequestProcessor`: every ephemeral of `session`
    /// when the prefix is empty, blank or `/` (after trimming), else those whose path starts
    /// with the prefix (a plain string prefix).
    pub fn ephemerals_with_prefix(&self, session: i64, prefix: &str) -> Vec<String> {
        let trimmed = prefix.trim();
        let all = self.ephemerals(session);
        if trimmed.is_empty() || trimmed == "/" {
            all
        } else {
            all.into_iter().filter(|p| p.starts_with(prefix)).collect()
        }
    }

    /// Every session owning ephemeral nodes, with their paths (the `dump` word).
    pub fn ephemerals_by_session(&self) -> &BTreeMap<i64, BTreeSet<String>> {
        &self.ephemerals
    }

    /// The container nodes' paths.
    pub fn containers(&self) -> &BTreeSet<String> {
        &self.containers
    }

    /// The TTL nodes' paths.
    pub fn ttls(&self) -> &BTreeSet<String> {
        &self.ttls
    }

    /// ZooKeeper's `getNodeCount`, which counts the root twice (it is in ZooKeeper's node map
    /// as both `""` and `/`): 5 on a fresh tree, as `mntr`'s `zk_znode_count`.
    pub fn node_count(&self) -> usize {
        self.nodes.len() + 1
    }

    /// The sum of every node's path length (in Java characters) and data length
    /// (`approximateDataSize`).
    pub fn approximate_data_size(&self) -> i64 {
        self.data_size
    }

    /// The number of ephemeral nodes (`getEphemeralsCount`).
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(BTreeSet::len).sum()
    }

    /// The zxid of the last applied transaction.
    pub fn last_processed_zxid(&self) -> i64 {
        self.last_processed_zxid
    }

    /// Records that the transaction `zxid` was applied (ZooKeeper's `processTxn` does it for
    /// every transaction, a session's creation included); never goes back.
    pub fn set_last_processed_zxid(&mut self, zxid: i64) {
        self.last_processed_zxid = self.last_processed_zxid.max(zxid);
    }

    /// The number of distinct ACL lists kept (`aclCacheSize`).
    pub fn acl_cache_size(&self) -> usize {
        self.acls.len()
    }

    /// `checkACL` on the node at `path`: `NoNode` when missing, else [`check_acl_list`].
    pub fn check_acl(&self, path: &str, perm: i32, auth: &[Id]) -> Result<(), ErrorCode> {
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        check_acl_list(&node.acl, perm, auth)
    }

    /// ContainerManager's candidates at `now_ms` (with ZooKeeper's default
    /// `znode.container.maxNeverUsedIntervalMs` of 0): see
    /// [`reap_candidates_with`](Self::reap_candidates_with).
    pub fn reap_candidates(&self, now_ms: i64) -> Vec<String> {
        self.reap_candidates_with(now_ms, 0)
    }

    /// `ContainerManager.getCandidates`: containers without children that ever had one
    /// (stored `cversion > 0`), or that never had one and were last modified more than
    /// `max_never_used_ms` ago (when it is not 0); and TTL nodes without children not
    /// modified for more than their TTL (`now - mtime > ttl`). Sorted.
    pub fn reap_candidates_with(&self, now_ms: i64, max_never_used_ms: i64) -> Vec<String> {
        let mut out = BTreeSet::new();
        for path in &self.containers {
            if let Some(n) = self.nodes.get(path.as_str()) {
                if n.children.is_empty()
                    && (n.cversion > 0
                        || (max_never_used_ms != 0
                            && now_ms.saturating_sub(n.mtime) > max_never_used_ms))
                {
                    out.insert(path.clone());
                }
            }
        }
        for path in &self.ttls {
            if let Some(n) = self.nodes.get(path.as_str()) {
                if let Kind::Ttl(ttl) = n.kind {
                    if n.children.is_empty() && ttl != 0 && now_ms.saturating_sub(n.mtime) > ttl {
                        out.insert(path.clone());
                    }
                }
            }
        }
        out.into_iter().collect()
    }

    // ---- writes ----

    /// Applies one write as transaction `zxid` at `time` for `session` authenticated as
    /// `auth`, checking ZooKeeper's rules in `PrepRequestProcessor`'s order; `events` gets the
    /// watch triggers in `DataTree`'s order. On an error nothing changes.
    pub fn apply_op(
        &mut self,
        zxid: i64,
        time: i64,
        session: i64,
        auth: &[Id],
        op: &TxnOp,
        events: &mut Vec<(String, EventType)>,
    ) -> Result<OpOutcome, ErrorCode> {
        let mut undo = Vec::new();
        let out = self.apply_one(zxid, time, session, auth, op, events, &mut undo);
        self.commit(undo);
        out
    }

    /// Applies a `multi`: every op in order (each sees the earlier ones' changes), or none.
    /// On failure the per-op codes ZooKeeper reports: `Ok` for the ops before the failed
    /// one, its error, `RuntimeInconsistency` for the ops after; no change and no event.
    pub fn apply_multi(
        &mut self,
        zxid: i64,
        time: i64,
        session: i64,
        auth: &[Id],
        ops: &[TxnOp],
        events: &mut Vec<(String, EventType)>,
    ) -> Result<Vec<OpOutcome>, Vec<ErrorCode>> {
        let mut undo = Vec::new();
        let mut local = Vec::new();
        let mut outcomes = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            match self.apply_one(zxid, time, session, auth, op, &mut local, &mut undo) {
                Ok(o) => outcomes.push(o),
                Err(e) => {
                    self.rollback(undo);
                    let mut codes = vec![ErrorCode::Ok; i];
                    codes.push(e);
                    codes.resize(ops.len(), ErrorCode::RuntimeInconsistency);
                    return Err(codes);
                }
            }
        }
        self.commit(undo);
        events.append(&mut local);
        Ok(outcomes)
    }

    /// Deletes `session`'s ephemeral nodes as transaction `zxid` (`killSession`), in path
    /// order (ZooKeeper's is its hash set's), each with its delete's events. Returns them.
    pub fn close_session(
        &mut self,
        zxid: i64,
        session: i64,
        events: &mut Vec<(String, EventType)>,
    ) -> Vec<String> {
        let paths = self.ephemerals(session);
        for path in &paths {
            if let Some((node, _)) = self.delete_node(path, zxid, events) {
                self.release(node.acl);
            }
        }
        paths
    }

    fn commit(&mut self, undo: Vec<Undo>) {
        for u in undo {
            match u {
                Undo::Deleted { node, .. } => self.release(node.acl),
                Undo::AclSet { acl, .. } => self.release(acl),
                Undo::Created { .. } | Undo::DataSet { .. } => {}
            }
        }
    }

    fn rollback(&mut self, undo: Vec<Undo>) {
        for u in undo.into_iter().rev() {
            match u {
                Undo::Created {
                    path,
                    parent,
                    parent_cversion,
                    parent_pzxid,
                } => {
                    if let Some(node) = self.remove_raw(&path) {
                        self.release(node.acl);
                    }
                    if let Some(p) = self.nodes.get_mut(parent.as_str()) {
                        p.cversion = parent_cversion;
                        p.pzxid = parent_pzxid;
                    }
                }
                Undo::Deleted {
                    path,
                    node,
                    parent,
                    parent_pzxid,
                } => {
                    self.insert_raw(path, node);
                    if let Some(p) = self.nodes.get_mut(parent.as_str()) {
                        p.pzxid = parent_pzxid;
                    }
                }
                Undo::DataSet {
                    path,
                    data,
                    mzxid,
                    mtime,
                    version,
                } => {
                    if let Some(n) = self.nodes.get_mut(path.as_str()) {
                        self.data_size += data.len() as i64 - n.data.len() as i64;
                        n.data = data;
                        n.mzxid = mzxid;
                        n.mtime = mtime;
                        n.version = version;
                    }
                }
                Undo::AclSet {
                    path,
                    acl,
                    aversion,
                } => {
                    if let Some(n) = self.nodes.get_mut(path.as_str()) {
                        let current = std::mem::replace(&mut n.acl, acl);
                        n.aversion = aversion;
                        self.release(current);
                    }
                }
            }
        }
    }

    /// Removes the node (no checks), updates its parent's `pzxid` (only upwards, as
    /// `deleteNode`) and records the events. Returns the node and the parent's old `pzxid`.
    fn delete_node(
        &mut self,
        path: &str,
        zxid: i64,
        events: &mut Vec<(String, EventType)>,
    ) -> Option<(Node, i64)> {
        let (parent, _) = split_parent(path)?;
        let parent = parent.to_string();
        let node = self.remove_raw(path)?;
        let mut old_pzxid = 0;
        if let Some(p) = self.nodes.get_mut(parent.as_str()) {
            old_pzxid = p.pzxid;
            if zxid > p.pzxid {
                p.pzxid = zxid;
            }
        }
        events.push((path.to_string(), EventType::NodeDeleted));
        events.push((parent, EventType::NodeChildrenChanged));
        Some((node, old_pzxid))
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_one(
        &mut self,
        zxid: i64,
        time: i64,
        session: i64,
        auth: &[Id],
        op: &TxnOp,
        events: &mut Vec<(String, EventType)>,
        undo: &mut Vec<Undo>,
    ) -> Result<OpOutcome, ErrorCode> {
        match op {
            TxnOp::Create {
                path,
                data,
                acl,
                mode,
                ttl,
            } => self.create(
                zxid, time, session, auth, path, data, acl, *mode, *ttl, events, undo,
            ),
            TxnOp::Delete { path, version } => {
                if path.contains('\0') || is_special(path) {
                    return Err(ErrorCode::BadArguments);
                }
                let (parent, _) = split_parent(path).ok_or(ErrorCode::BadArguments)?;
                let parent_node = self.nodes.get(parent).ok_or(ErrorCode::NoNode)?;
                check_acl_list(&parent_node.acl, perms::DELETE, auth)?;
                let node = self.nodes.get(path.as_str()).ok_or(ErrorCode::NoNode)?;
                check_version(node.version, *version)?;
                if !node.children.is_empty() {
                    return Err(ErrorCode::NotEmpty);
                }
                self.delete_undoable(path, zxid, events, undo)
            }
            TxnOp::DeleteContainer { path } => {
                if path.contains('\0') || is_special(path) {
                    return Err(ErrorCode::BadArguments);
                }
                let (parent, _) = split_parent(path).ok_or(ErrorCode::BadArguments)?;
                let node = self.nodes.get(path.as_str()).ok_or(ErrorCode::NoNode)?;
                if !node.children.is_empty() {
                    return Err(ErrorCode::NotEmpty);
                }
                if matches!(node.kind, Kind::Ephemeral(_)) {
                    return Err(ErrorCode::BadVersion);
                }
                self.nodes.get(parent).ok_or(ErrorCode::NoNode)?;
                self.delete_undoable(path, zxid, events, undo)
            }
            TxnOp::SetData {
                path,
                data,
                version,
            } => {
                validate_path(path)?;
                let node = self.nodes.get(path.as_str()).ok_or(ErrorCode::NoNode)?;
                check_acl_list(&node.acl, perms::WRITE, auth)?;
                let new_version = check_version(node.version, *version)?;
                let node = self.nodes.get_mut(path.as_str()).ok_or(ErrorCode::NoNode)?;
                let old = std::mem::replace(&mut node.data, data.clone().into_boxed_slice());
                self.data_size += data.len() as i64 - old.len() as i64;
                undo.push(Undo::DataSet {
                    path: path.clone(),
                    data: old,
                    mzxid: node.mzxid,
                    mtime: node.mtime,
                    version: node.version,
                });
                node.mtime = time;
                node.mzxid = zxid;
                node.version = new_version;
                let stat = node.stat();
                events.push((path.clone(), EventType::NodeDataChanged));
                Ok(OpOutcome::SetData { stat })
            }
            TxnOp::SetAcl { path, acl, version } => {
                validate_path(path)?;
                let acl = fixup_acl(acl, auth)?;
                let node = self.nodes.get(path.as_str()).ok_or(ErrorCode::NoNode)?;
                check_acl_list(&node.acl, perms::ADMIN, auth)?;
                let new_version = check_version(node.aversion, *version)?;
                let acl = self.intern(&acl);
                let node = self.nodes.get_mut(path.as_str()).ok_or(ErrorCode::NoNode)?;
                let old = std::mem::replace(&mut node.acl, acl);
                undo.push(Undo::AclSet {
                    path: path.clone(),
                    acl: old,
                    aversion: node.aversion,
                });
                node.aversion = new_version;
                Ok(OpOutcome::SetAcl { stat: node.stat() })
            }
            TxnOp::Check { path, version } => {
                validate_path(path)?;
                let node = self.nodes.get(path.as_str()).ok_or(ErrorCode::NoNode)?;
                check_acl_list(&node.acl, perms::READ, auth)?;
                check_version(node.version, *version)?;
                Ok(OpOutcome::Checked)
            }
        }
    }

    fn delete_undoable(
        &mut self,
        path: &str,
        zxid: i64,
        events: &mut Vec<(String, EventType)>,
        undo: &mut Vec<Undo>,
    ) -> Result<OpOutcome, ErrorCode> {
        let (parent, _) = split_parent(path).ok_or(ErrorCode::BadArguments)?;
        let parent = parent.to_string();
        let (node, parent_pzxid) = self
            .delete_node(path, zxid, events)
            .ok_or(ErrorCode::NoNode)?;
        undo.push(Undo::Deleted {
            path: path.to_string(),
            node,
            parent,
            parent_pzxid,
        });
        Ok(OpOutcome::Deleted)
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &mut self,
        zxid: i64,
        time: i64,
        session: i64,
        auth: &[Id],
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        ttl: i64,
        events: &mut Vec<(String, EventType)>,
        undo: &mut Vec<Undo>,
    ) -> Result<OpOutcome, ErrorCode> {
        // validateCreateRequest: EphemeralType.validateTTL.
        if mode.is_ttl() {
            if ttl <= 0 || ttl > TTL_MAX_MS {
                return Err(ErrorCode::BadArguments);
            }
        } else if ttl >= 0 {
            return Err(ErrorCode::BadArguments);
        }
        // validatePathForCreate.
        if path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let (parent_path, _) = split_parent(path).ok_or(ErrorCode::BadArguments)?;
        let acl = fixup_acl(acl, auth)?;
        let parent = self.nodes.get(parent_path).ok_or(ErrorCode::NoNode)?;
        check_acl_list(&parent.acl, perms::CREATE, auth)?;
        let path = if mode.is_sequential() {
            format!("{path}{:010}", parent.cversion)
        } else {
            path.to_string()
        };
        validate_path(&path)?;
        if self.nodes.contains_key(path.as_str()) {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(parent.kind, Kind::Ephemeral(_)) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let kind = match mode {
            CreateMode::Ephemeral | CreateMode::EphemeralSequential => Kind::Ephemeral(session),
            CreateMode::Container => Kind::Container,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl => {
                Kind::Ttl(ttl)
            }
            CreateMode::Persistent | CreateMode::PersistentSequential => Kind::Persistent,
        };
        let parent_path = parent_path.to_string();
        let acl = self.intern(&acl);
        let parent = self
            .nodes
            .get_mut(parent_path.as_str())
            .ok_or(ErrorCode::NoNode)?;
        undo.push(Undo::Created {
            path: path.clone(),
            parent: parent_path.clone(),
            parent_cversion: parent.cversion,
            parent_pzxid: parent.pzxid,
        });
        parent.cversion = parent.cversion.wrapping_add(1);
        parent.pzxid = zxid;
        let node = Node {
            data: data.into(),
            acl,
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            version: 0,
            cversion: 0,
            aversion: 0,
            pzxid: zxid,
            kind,
            children: BTreeSet::new(),
        };
        let stat = node.stat();
        self.insert_raw(path.clone(), node);
        events.push((path.clone(), EventType::NodeCreated));
        events.push((parent_path, EventType::NodeChildrenChanged));
        Ok(OpOutcome::Created { path, stat })
    }

    // ---- snapshot ----

    /// The tree's bytes: the version, the last zxid, the table of distinct ACL lists, then
    /// every node depth-first (a parent before its children, children in name order).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(TREE_VERSION);
        w.i64(self.last_processed_zxid);
        // Depth-first order, with an explicit stack (a path can be deep).
        let mut order: Vec<&str> = Vec::with_capacity(self.nodes.len());
        let mut stack: Vec<String> = vec!["/".to_string()];
        let mut keys: Vec<String> = Vec::new();
        while let Some(path) = stack.pop() {
            let Some(node) = self.nodes.get(path.as_str()) else {
                continue;
            };
            for child in node.children.iter().rev() {
                stack.push(if path == "/" {
                    format!("/{child}")
                } else {
                    format!("{path}/{child}")
                });
            }
            keys.push(path);
        }
        for k in &keys {
            if let Some((key, _)) = self.nodes.get_key_value(k.as_str()) {
                order.push(&**key);
            }
        }
        let mut table: HashMap<&[Acl], u32> = HashMap::new();
        let mut lists: Vec<&[Acl]> = Vec::new();
        for path in &order {
            let acl: &[Acl] = &self.nodes[*path].acl;
            if !table.contains_key(acl) {
                table.insert(acl, lists.len() as u32);
                lists.push(acl);
            }
        }
        w.len(lists.len());
        for l in &lists {
            w.acl(l);
        }
        w.len(order.len());
        for path in &order {
            let n = &self.nodes[*path];
            w.str(path);
            w.u32(table[&*n.acl]);
            w.bytes(&n.data);
            w.i64(n.czxid);
            w.i64(n.mzxid);
            w.i64(n.ctime);
            w.i64(n.mtime);
            w.i32(n.version);
            w.i32(n.cversion);
            w.i32(n.aversion);
            w.i64(n.pzxid);
            match n.kind {
                Kind::Persistent => w.u8(0),
                Kind::Ephemeral(owner) => {
                    w.u8(1);
                    w.i64(owner);
                }
                Kind::Container => w.u8(2),
                Kind::Ttl(ttl) => {
                    w.u8(3);
                    w.i64(ttl);
                }
            }
        }
        w.out
    }

    /// Decodes [`encode`](Self::encode)'s bytes; bounded by the input's length.
    pub fn decode(bytes: &[u8]) -> Result<DataTree, TreeError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("version")?;
        if version != TREE_VERSION {
            return Err(TreeError::UnknownVersion(version));
        }
        let last_processed_zxid = r.i64("last zxid")?;
        let mut tree = DataTree {
            nodes: HashMap::new(),
            acls: HashSet::new(),
            ephemerals: BTreeMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            data_size: 0,
            last_processed_zxid,
        };
        let n_lists = r.count("acl table", 4)?;
        let mut lists = Vec::with_capacity(n_lists);
        for _ in 0..n_lists {
            let acl = r.acl()?;
            lists.push(tree.intern(&acl));
        }
        // Path, ACL index, data, 4 longs, 3 ints, a long and a kind byte at least.
        let n_nodes = r.count("nodes", 4 + 4 + 4 + 32 + 12 + 8 + 1)?;
        for i in 0..n_nodes {
            let path = r.string("path")?;
            let index = r.u32("acl index")?;
            let acl = lists
                .get(index as usize)
                .cloned()
                .ok_or(TreeError::BadAclIndex(index))?;
            let data: Box<[u8]> = r.bytes("data")?.into();
            let czxid = r.i64("czxid")?;
            let mzxid = r.i64("mzxid")?;
            let ctime = r.i64("ctime")?;
            let mtime = r.i64("mtime")?;
            let version = r.i32("version")?;
            let cversion = r.i32("cversion")?;
            let aversion = r.i32("aversion")?;
            let pzxid = r.i64("pzxid")?;
            let kind = match r.u8("kind")? {
                0 => Kind::Persistent,
                1 => Kind::Ephemeral(r.i64("owner")?),
                2 => Kind::Container,
                3 => Kind::Ttl(r.i64("ttl")?),
                k => return Err(TreeError::UnknownKind(k)),
            };
            let node = Node {
                data,
                acl,
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                pzxid,
                kind,
                children: BTreeSet::new(),
            };
            if i == 0 {
                if path != "/" {
                    return Err(TreeError::NoRoot);
                }
                tree.data_size += node_size(&path, &node.data);
                tree.nodes.insert(path.into_boxed_str(), Box::new(node));
                continue;
            }
            if validate_path(&path).is_err() || path == "/" {
                return Err(TreeError::BadPath(path));
            }
            if tree.nodes.contains_key(path.as_str()) {
                return Err(TreeError::DuplicatePath(path));
            }
            let parent_exists =
                split_parent(&path).is_some_and(|(p, _)| tree.nodes.contains_key(p));
            if !parent_exists {
                return Err(TreeError::MissingParent(path));
            }
            tree.insert_raw(path, node);
        }
        if tree.nodes.is_empty() {
            return Err(TreeError::NoRoot);
        }
        r.finish()?;
        drop(lists);
        // Lists of the table no node uses.
        tree.acls.retain(|a| Arc::strong_count(a) > 1);
        Ok(tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: i64 = 0x100;

    fn create(path: &str, mode: CreateMode) -> TxnOp {
        TxnOp::Create {
            path: path.into(),
            data: b"d".to_vec(),
            acl: Acl::open_unsafe(),
            mode,
            ttl: if mode.is_ttl() { 1000 } else { -1 },
        }
    }

    fn apply(t: &mut DataTree, zxid: i64, op: TxnOp) -> Result<OpOutcome, ErrorCode> {
        let mut ev = Vec::new();
        t.apply_op(zxid, zxid * 10, S, &[], &op, &mut ev)
    }

    fn ok(t: &mut DataTree, zxid: i64, op: TxnOp) -> OpOutcome {
        apply(t, zxid, op).expect("op applies")
    }

    fn created_path(o: OpOutcome) -> String {
        match o {
            OpOutcome::Created { path, .. } => path,
            other => panic!("not a create: {other:?}"),
        }
    }

    #[test]
    fn fresh_tree_is_zookeeper_3_8s() {
        let t = DataTree::new();
        assert_eq!(t.children("/"), Some(vec!["zookeeper".to_string()]));
        assert_eq!(
            t.children("/zookeeper"),
            Some(vec!["config".to_string(), "quota".to_string()])
        );
        let root = t.stat("/").unwrap();
        assert_eq!(root.cversion, -1, "2 * 0 creates - 1 child");
        assert_eq!(root.num_children, 1);
        assert_eq!(
            (root.czxid, root.mzxid, root.pzxid, root.ctime),
            (0, 0, 0, 0)
        );
        assert_eq!(t.stat("/zookeeper").unwrap().cversion, -2);
        let (acl, stat) = t.get_acl("/zookeeper/config").unwrap();
        assert_eq!(
            acl,
            vec![Acl {
                perms: perms::READ,
                id: Id::anyone()
            }]
        );
        assert_eq!(stat.aversion, -1);
        assert_eq!(t.get_acl("/zookeeper/quota").unwrap().0, Acl::open_unsafe());
        assert_eq!(t.node_count(), 5);
        assert_eq!(t.all_children_number("/"), Some(3));
        assert_eq!(t.all_children_number("/zookeeper"), Some(2));
        assert_eq!(t.approximate_data_size(), 1 + 10 + 16 + 17);
    }

    #[test]
    fn all_children_number_counts_every_descendant_and_data_size_counts_java_chars() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/a", CreateMode::Persistent));
        ok(&mut t, 2, create("/a/b", CreateMode::Persistent));
        ok(&mut t, 3, create("/a/b/c", CreateMode::Persistent));
        ok(&mut t, 4, create("/ab", CreateMode::Persistent));
        assert_eq!(t.all_children_number("/a"), Some(2));
        assert_eq!(t.all_children_number("/a/b/c"), Some(0));
        assert_eq!(t.all_children_number("/"), Some(7));
        assert_eq!(t.all_children_number("/nope"), None);
        assert_eq!(
            t.get_data("/a/b").map(|(d, s)| (d.to_vec(), s.czxid)),
            Some((b"d".to_vec(), 2))
        );
        let before = t.approximate_data_size();
        ok(&mut t, 5, create("/é", CreateMode::Persistent));
        assert_eq!(t.approximate_data_size(), before + 2 + 1);
        ok(
            &mut t,
            6,
            TxnOp::SetData {
                path: "/é".into(),
                data: vec![0; 10],
                version: -1,
            },
        );
        assert_eq!(t.approximate_data_size(), before + 2 + 10);
        ok(
            &mut t,
            7,
            TxnOp::Delete {
                path: "/é".into(),
                version: -1,
            },
        );
        assert_eq!(t.approximate_data_size(), before);
    }

    #[test]
    fn create_sets_stat_and_bumps_parent_cversion_and_pzxid() {
        let mut t = DataTree::new();
        let mut ev = Vec::new();
        let out = t
            .apply_op(
                7,
                1234,
                S,
                &[],
                &create("/a", CreateMode::Persistent),
                &mut ev,
            )
            .unwrap();
        let OpOutcome::Created { path, stat } = out else {
            panic!()
        };
        assert_eq!(path, "/a");
        assert_eq!(
            stat,
            Stat {
                czxid: 7,
                mzxid: 7,
                ctime: 1234,
                mtime: 1234,
                version: 0,
                cversion: 0,
                aversion: 0,
                ephemeral_owner: 0,
                data_length: 1,
                num_children: 0,
                pzxid: 7,
            }
        );
        let root = t.stat("/").unwrap();
        assert_eq!((root.cversion, root.pzxid, root.num_children), (0, 7, 2));
        assert_eq!(
            ev,
            vec![
                ("/a".to_string(), EventType::NodeCreated),
                ("/".to_string(), EventType::NodeChildrenChanged)
            ]
        );
    }

    #[test]
    fn sequential_suffix_is_parent_cversion_zero_padded_to_ten_digits() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/p", CreateMode::Persistent));
        let a = created_path(ok(
            &mut t,
            2,
            create("/p/x-", CreateMode::PersistentSequential),
        ));
        assert_eq!(a, "/p/x-0000000000");
        ok(
            &mut t,
            3,
            TxnOp::Delete {
                path: a,
                version: -1,
            },
        );
        // The suffix counts creations: a delete does not reuse a number.
        let b = created_path(ok(
            &mut t,
            4,
            create("/p/x-", CreateMode::EphemeralSequential),
        ));
        assert_eq!(b, "/p/x-0000000001");
        // A sequential create may end with '/': the suffix is the name.
        let c = created_path(ok(
            &mut t,
            5,
            create("/p/", CreateMode::PersistentSequential),
        ));
        assert_eq!(c, "/p/0000000002");
        // Reported cversion: 3 creates + 1 delete.
        assert_eq!(t.stat("/p").unwrap().cversion, 4);
    }

    #[test]
    fn delete_bumps_parent_cversion_and_pzxid() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/a", CreateMode::Persistent));
        ok(&mut t, 2, create("/a/b", CreateMode::Persistent));
        assert_eq!(t.stat("/a").unwrap().cversion, 1);
        let mut ev = Vec::new();
        t.apply_op(
            3,
            0,
            S,
            &[],
            &TxnOp::Delete {
                path: "/a/b".into(),
                version: 0,
            },
            &mut ev,
        )
        .unwrap();
        let a = t.stat("/a").unwrap();
        assert_eq!((a.cversion, a.pzxid, a.num_children), (2, 3, 0));
        assert_eq!(
            ev,
            vec![
                ("/a/b".to_string(), EventType::NodeDeleted),
                ("/a".to_string(), EventType::NodeChildrenChanged)
            ]
        );
    }

    #[test]
    fn missing_parent_is_no_node_and_existing_node_is_node_exists() {
        let mut t = DataTree::new();
        assert_eq!(
            apply(&mut t, 1, create("/a/b", CreateMode::Persistent)),
            Err(ErrorCode::NoNode)
        );
        ok(&mut t, 2, create("/a", CreateMode::Persistent));
        assert_eq!(
            apply(&mut t, 3, create("/a", CreateMode::Persistent)),
            Err(ErrorCode::NodeExists)
        );
        assert_eq!(
            apply(&mut t, 4, create("/", CreateMode::Persistent)),
            Err(ErrorCode::NodeExists)
        );
    }

    #[test]
    fn ephemeral_parent_refuses_children() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/e", CreateMode::Ephemeral));
        assert_eq!(
            apply(&mut t, 2, create("/e/c", CreateMode::Persistent)),
            Err(ErrorCode::NoChildrenForEphemerals)
        );
        // Containers and TTL nodes may have children.
        ok(&mut t, 3, create("/c", CreateMode::Container));
        ok(&mut t, 4, create("/c/x", CreateMode::Persistent));
        ok(&mut t, 5, create("/t", CreateMode::PersistentWithTtl));
        ok(&mut t, 6, create("/t/x", CreateMode::Persistent));
    }

    #[test]
    fn ephemeral_owner_is_the_session_and_containers_and_ttl_nodes_show_zero() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/e", CreateMode::Ephemeral));
        ok(&mut t, 2, create("/c", CreateMode::Container));
        ok(&mut t, 3, create("/t", CreateMode::PersistentWithTtl));
        assert_eq!(t.stat("/e").unwrap().ephemeral_owner, S);
        assert_eq!(t.stat("/c").unwrap().ephemeral_owner, 0);
        assert_eq!(t.stat("/t").unwrap().ephemeral_owner, 0);
        assert_eq!(t.ephemerals(S), vec!["/e".to_string()]);
        assert_eq!(t.ephemeral_count(), 1);
        assert_eq!(t.containers().len(), 1);
        assert_eq!(t.ttls().len(), 1);
    }

    #[test]
    fn bad_version_and_not_empty() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/a", CreateMode::Persistent));
        ok(&mut t, 2, create("/a/b", CreateMode::Persistent));
        assert_eq!(
            apply(
                &mut t,
                3,
                TxnOp::Delete {
                    path: "/a".into(),
                    version: -1
                }
            ),
            Err(ErrorCode::NotEmpty)
        );
        assert_eq!(
            apply(
                &mut t,
                3,
                TxnOp::Delete {
                    path: "/a".into(),
                    version: 5
                }
            ),
            Err(ErrorCode::BadVersion),
            "the version is checked before the children"
        );
        assert_eq!(
            apply(
                &mut t,
                3,
                TxnOp::SetData {
                    path: "/a".into(),
                    data: vec![],
                    version: 1
                }
            ),
            Err(ErrorCode::BadVersion)
        );
        let OpOutcome::SetData { stat } = ok(
            &mut t,
            4,
            TxnOp::SetData {
                path: "/a".into(),
                data: b"xyz".to_vec(),
                version: 0,
            },
        ) else {
            panic!()
        };
        assert_eq!(
            (stat.version, stat.mzxid, stat.mtime, stat.data_length),
            (1, 4, 40, 3)
        );
        assert_eq!(stat.czxid, 1);
        assert_eq!(
            apply(
                &mut t,
                5,
                TxnOp::Check {
                    path: "/a".into(),
                    version: 0
                }
            ),
            Err(ErrorCode::BadVersion)
        );
        assert_eq!(
            apply(
                &mut t,
                5,
                TxnOp::Check {
                    path: "/a".into(),
                    version: 1
                }
            ),
            Ok(OpOutcome::Checked)
        );
        assert_eq!(
            apply(
                &mut t,
                5,
                TxnOp::Check {
                    path: "/zz".into(),
                    version: -1
                }
            ),
            Err(ErrorCode::NoNode)
        );
    }

    #[test]
    fn set_acl_bumps_aversion_and_checks_it() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/a", CreateMode::Persistent));
        let acl = vec![Acl {
            perms: perms::READ,
            id: Id::anyone(),
        }];
        assert_eq!(
            apply(
                &mut t,
                2,
                TxnOp::SetAcl {
                    path: "/a".into(),
                    acl: acl.clone(),
                    version: 3
                }
            ),
            Err(ErrorCode::BadVersion)
        );
        let OpOutcome::SetAcl { stat } = ok(
            &mut t,
            2,
            TxnOp::SetAcl {
                path: "/a".into(),
                acl: acl.clone(),
                version: 0,
            },
        ) else {
            panic!()
        };
        assert_eq!((stat.aversion, stat.mzxid), (1, 1));
        assert_eq!(t.get_acl("/a").unwrap().0, acl);
        // Now read-only: writes are refused.
        assert_eq!(
            apply(
                &mut t,
                3,
                TxnOp::SetData {
                    path: "/a".into(),
                    data: vec![],
                    version: -1
                }
            ),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(
            apply(
                &mut t,
                3,
                TxnOp::SetAcl {
                    path: "/a".into(),
                    acl,
                    version: -1
                }
            ),
            Err(ErrorCode::NoAuth),
            "setACL needs ADMIN"
        );
    }

    #[test]
    fn acl_checks_use_the_parent_for_create_and_delete() {
        let mut t = DataTree::new();
        let alice = digest_id("alice:secret").unwrap();
        let mut ev = Vec::new();
        let only_alice_create = TxnOp::Create {
            path: "/p".into(),
            data: vec![],
            acl: vec![
                Acl {
                    perms: perms::CREATE | perms::READ,
                    id: Id::new("auth", ""),
                },
                Acl {
                    perms: perms::DELETE,
                    id: Id::anyone(),
                },
            ],
            mode: CreateMode::Persistent,
            ttl: -1,
        };
        assert_eq!(
            t.apply_op(1, 0, S, &[], &only_alice_create, &mut ev),
            Err(ErrorCode::InvalidAcl),
            "auth: with no authenticated id"
        );
        t.apply_op(
            1,
            0,
            S,
            std::slice::from_ref(&alice),
            &only_alice_create,
            &mut ev,
        )
        .unwrap();
        let (acl, _) = t.get_acl("/p").unwrap();
        assert_eq!(
            acl[0].id, alice,
            "auth: expanded to the session's digest id"
        );
        let child = create("/p/c", CreateMode::Persistent);
        assert_eq!(
            t.apply_op(2, 0, S, &[], &child, &mut ev),
            Err(ErrorCode::NoAuth)
        );
        t.apply_op(2, 0, S, std::slice::from_ref(&alice), &child, &mut ev)
            .unwrap();
        // DELETE on the parent is world's.
        t.apply_op(
            3,
            0,
            S,
            &[],
            &TxnOp::Delete {
                path: "/p/c".into(),
                version: -1,
            },
            &mut ev,
        )
        .unwrap();
        // A super id passes every check.
        t.apply_op(4, 0, S, &[Id::new("super", "")], &child, &mut ev)
            .unwrap();
        assert_eq!(t.check_acl("/p", perms::READ, &[]), Err(ErrorCode::NoAuth));
        assert_eq!(t.check_acl("/p", perms::READ, &[alice]), Ok(()));
        assert_eq!(
            t.check_acl("/nope", perms::READ, &[]),
            Err(ErrorCode::NoNode)
        );
    }

    #[test]
    fn check_needs_read() {
        let mut t = DataTree::new();
        ok(
            &mut t,
            1,
            TxnOp::Create {
                path: "/w".into(),
                data: vec![],
                acl: vec![Acl {
                    perms: perms::WRITE,
                    id: Id::anyone(),
                }],
                mode: CreateMode::Persistent,
                ttl: -1,
            },
        );
        assert_eq!(
            apply(
                &mut t,
                2,
                TxnOp::Check {
                    path: "/w".into(),
                    version: -1
                }
            ),
            Err(ErrorCode::NoAuth)
        );
    }

    #[test]
    fn fixup_acl_refuses_empty_unknown_schemes_and_bad_ids() {
        let a = |s: &str, i: &str| Acl {
            perms: perms::ALL,
            id: Id::new(s, i),
        };
        assert_eq!(fixup_acl(&[], &[]), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup_acl(&[a("foo", "x")], &[]), Err(ErrorCode::InvalidAcl));
        assert_eq!(
            fixup_acl(&[a("world", "x")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup_acl(&[a("digest", "user")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup_acl(&[a("digest", "a:b:c")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup_acl(&[a("digest", "a:")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        assert!(fixup_acl(&[a("digest", "a:b")], &[]).is_ok());
        assert!(fixup_acl(&[a("ip", "10.0.0.0/8")], &[]).is_ok());
        assert_eq!(
            fixup_acl(&[a("ip", "10.0.0/8")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup_acl(&[a("ip", "10.0.0.1/33")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup_acl(&[a("auth", "")], &[Id::new("ip", "1.2.3.4")]),
            Err(ErrorCode::InvalidAcl),
            "ip ids are not authenticated"
        );
        // Duplicates removed.
        assert_eq!(
            fixup_acl(&[a("world", "anyone"), a("world", "anyone")], &[])
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn ip_acl_matches_the_network() {
        let acl = [Acl {
            perms: perms::READ,
            id: Id::new("ip", "10.1.0.0/16"),
        }];
        assert_eq!(
            check_acl_list(&acl, perms::READ, &[Id::new("ip", "10.1.2.3")]),
            Ok(())
        );
        assert_eq!(
            check_acl_list(&acl, perms::READ, &[Id::new("ip", "10.2.2.3")]),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(
            check_acl_list(&[], perms::READ, &[]),
            Ok(()),
            "an empty ACL allows all"
        );
    }

    #[test]
    fn digest_id_matches_zookeeper() {
        // DigestAuthenticationProvider.generateDigest: user:base64(sha1("user:password")),
        // computed independently.
        assert_eq!(
            digest_id("super:admin"),
            Some(Id::new("digest", "super:xQJmxLMiHGwaqBvst5y6rkB6HQs="))
        );
        assert_eq!(
            digest_id("alice:secret"),
            Some(Id::new("digest", "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="))
        );
        assert_eq!(
            digest_id("user:pass:with:colons"),
            Some(Id::new("digest", "user:DpsYo898LgpAU5H7pDG9EBaya+Q="))
        );
    }

    #[test]
    fn path_validation_is_pathutils() {
        for bad in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/./b",
            "/a/../b",
            "/a\0",
            "/a\u{1}",
            "/a\u{7f}",
            "/a\u{9f}",
            "/a\u{e000}",
            "/a\u{fff0}",
            "/a\u{1F600}",
        ] {
            assert_eq!(validate_path(bad), Err(ErrorCode::BadArguments), "{bad:?}");
        }
        for good in [
            "/", "/a", "/a/b", "/.a", "/a.", "/...", "/a/..b", "/é", "/a b",
        ] {
            assert_eq!(validate_path(good), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn create_with_a_bad_path_is_bad_arguments() {
        let mut t = DataTree::new();
        // The parent is looked up first (PrepRequestProcessor's order).
        assert_eq!(
            apply(&mut t, 1, create("/a/", CreateMode::Persistent)),
            Err(ErrorCode::NoNode)
        );
        ok(&mut t, 1, create("/a", CreateMode::Persistent));
        assert_eq!(
            apply(&mut t, 1, create("/a//b", CreateMode::Persistent)),
            Err(ErrorCode::NoNode)
        );
        for p in ["a", "/a/", "/a\0b", "/a/."] {
            assert_eq!(
                apply(&mut t, 1, create(p, CreateMode::Persistent)),
                Err(ErrorCode::BadArguments),
                "{p:?}"
            );
        }
        assert_eq!(
            apply(
                &mut t,
                1,
                TxnOp::SetData {
                    path: "x".into(),
                    data: vec![],
                    version: -1
                }
            ),
            Err(ErrorCode::BadArguments)
        );
    }

    #[test]
    fn special_nodes_cannot_be_deleted() {
        let mut t = DataTree::new();
        for p in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
            assert_eq!(
                apply(
                    &mut t,
                    1,
                    TxnOp::Delete {
                        path: p.into(),
                        version: -1
                    }
                ),
                Err(ErrorCode::BadArguments),
                "{p}"
            );
        }
        assert_eq!(
            apply(
                &mut t,
                1,
                TxnOp::Delete {
                    path: "/nope".into(),
                    version: -1
                }
            ),
            Err(ErrorCode::NoNode)
        );
    }

    #[test]
    fn ttl_must_be_positive_and_at_most_the_maximum_and_only_with_a_ttl_mode() {
        let mut t = DataTree::new();
        let ttl_create = |ttl: i64, mode| TxnOp::Create {
            path: "/t".into(),
            data: vec![],
            acl: Acl::open_unsafe(),
            mode,
            ttl,
        };
        for ttl in [0, -1, TTL_MAX_MS + 1] {
            assert_eq!(
                apply(&mut t, 1, ttl_create(ttl, CreateMode::PersistentWithTtl)),
                Err(ErrorCode::BadArguments)
            );
        }
        assert_eq!(
            apply(&mut t, 1, ttl_create(0, CreateMode::Persistent)),
            Err(ErrorCode::BadArguments),
            "a TTL with a non-TTL mode"
        );
        ok(
            &mut t,
            1,
            ttl_create(TTL_MAX_MS, CreateMode::PersistentWithTtl),
        );
    }

    #[test]
    fn multi_failure_reports_ok_for_ops_before_and_runtime_inconsistency_after() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/x", CreateMode::Persistent));
        let before = t.clone();
        let ops = vec![
            create("/a", CreateMode::Persistent),
            TxnOp::SetData {
                path: "/x".into(),
                data: b"new".to_vec(),
                version: -1,
            },
            TxnOp::Delete {
                path: "/x".into(),
                version: -1,
            },
            TxnOp::SetAcl {
                path: "/a".into(),
                acl: Acl::open_unsafe(),
                version: -1,
            },
            create("/a", CreateMode::Persistent),
            TxnOp::Check {
                path: "/a".into(),
                version: -1,
            },
        ];
        let mut ev = Vec::new();
        assert_eq!(
            t.apply_multi(2, 0, S, &[], &ops, &mut ev),
            Err(vec![
                ErrorCode::Ok,
                ErrorCode::Ok,
                ErrorCode::Ok,
                ErrorCode::Ok,
                ErrorCode::NodeExists,
                ErrorCode::RuntimeInconsistency
            ])
        );
        assert!(ev.is_empty(), "no event on failure");
        assert_eq!(t, before, "no change on failure");
        assert_eq!(t.encode(), before.encode());
    }

    #[test]
    fn multi_ops_see_the_earlier_ops_and_succeed_together() {
        let mut t = DataTree::new();
        let ops = vec![
            create("/a", CreateMode::Persistent),
            create("/a/b", CreateMode::Persistent),
            TxnOp::Check {
                path: "/a/b".into(),
                version: 0,
            },
            TxnOp::Delete {
                path: "/a/b".into(),
                version: 0,
            },
        ];
        let mut ev = Vec::new();
        let out = t.apply_multi(5, 0, S, &[], &ops, &mut ev).unwrap();
        assert_eq!(out.len(), 4);
        assert_eq!(out[3], OpOutcome::Deleted);
        assert_eq!(t.stat("/a").unwrap().cversion, 2);
        assert_eq!(ev.len(), 6);
    }

    #[test]
    fn close_session_deletes_its_ephemerals_with_events() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/p", CreateMode::Persistent));
        ok(&mut t, 2, create("/p/e1", CreateMode::Ephemeral));
        ok(&mut t, 3, create("/e2", CreateMode::Ephemeral));
        let mut ev = Vec::new();
        let gone = t.close_session(4, S, &mut ev);
        assert_eq!(gone, vec!["/e2".to_string(), "/p/e1".to_string()]);
        assert_eq!(t.stat("/p").unwrap().pzxid, 4);
        assert!(t.ephemerals(S).is_empty());
        assert_eq!(ev.len(), 4);
        assert_eq!(ev[0], ("/e2".to_string(), EventType::NodeDeleted));
    }

    #[test]
    fn get_ephemerals_filters_by_plain_prefix() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/ab", CreateMode::Ephemeral));
        ok(&mut t, 2, create("/b", CreateMode::Ephemeral));
        assert_eq!(t.ephemerals_with_prefix(S, " / ").len(), 2);
        assert_eq!(t.ephemerals_with_prefix(S, "").len(), 2);
        assert_eq!(t.ephemerals_with_prefix(S, "/a"), vec!["/ab".to_string()]);
    }

    #[test]
    fn containers_are_reaped_once_emptied_and_ttl_nodes_after_their_ttl() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/c", CreateMode::Container));
        ok(&mut t, 2, create("/t", CreateMode::PersistentWithTtl)); // mtime 20, ttl 1000
        assert_eq!(
            t.reap_candidates(100),
            Vec::<String>::new(),
            "a new container stays"
        );
        assert_eq!(
            t.reap_candidates_with(100_000, 50),
            vec!["/c".to_string(), "/t".to_string()]
        );
        ok(&mut t, 3, create("/c/x", CreateMode::Persistent));
        assert!(
            t.reap_candidates(1020).is_empty(),
            "ttl not yet passed (strictly more)"
        );
        ok(
            &mut t,
            4,
            TxnOp::Delete {
                path: "/c/x".into(),
                version: -1,
            },
        );
        assert_eq!(
            t.reap_candidates(1021),
            vec!["/c".to_string(), "/t".to_string()]
        );
        // A container that got a child meanwhile: NotEmpty.
        ok(&mut t, 5, create("/c/y", CreateMode::Persistent));
        assert_eq!(
            apply(&mut t, 6, TxnOp::DeleteContainer { path: "/c".into() }),
            Err(ErrorCode::NotEmpty)
        );
        ok(&mut t, 7, create("/e", CreateMode::Ephemeral));
        assert_eq!(
            apply(&mut t, 8, TxnOp::DeleteContainer { path: "/e".into() }),
            Err(ErrorCode::BadVersion),
            "an ephemeral is never reaped"
        );
        assert_eq!(
            apply(&mut t, 9, TxnOp::DeleteContainer { path: "/t".into() }),
            Ok(OpOutcome::Deleted)
        );
        assert!(t.ttls().is_empty());
    }

    #[test]
    fn identical_acls_are_shared_and_released() {
        let mut t = DataTree::new();
        let base = t.acl_cache_size();
        for i in 0..100 {
            ok(
                &mut t,
                i + 1,
                create(&format!("/n{i}"), CreateMode::Persistent),
            );
        }
        assert_eq!(t.acl_cache_size(), base);
        let private = vec![Acl {
            perms: perms::ALL,
            id: Id::new("digest", "a:b"),
        }];
        ok(
            &mut t,
            200,
            TxnOp::SetAcl {
                path: "/n1".into(),
                acl: private,
                version: -1,
            },
        );
        assert_eq!(t.acl_cache_size(), base + 1);
        ok(
            &mut t,
            201,
            TxnOp::Delete {
                path: "/n1".into(),
                version: -1,
            },
        );
        assert_eq!(t.acl_cache_size(), base);
    }

    #[test]
    fn snapshot_cut_short_or_corrupt_is_refused() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/a", CreateMode::Persistent));
        let bytes = t.encode();
        for cut in 0..bytes.len() {
            assert!(DataTree::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(DataTree::decode(&bytes).unwrap(), t);
    }

    fn arb_ops() -> impl Strategy<Value = Vec<(u8, u8, u8, Vec<u8>)>> {
        proptest::collection::vec(
            (
                0u8..6,
                0u8..6,
                0u8..7,
                proptest::collection::vec(any::<u8>(), 0..4),
            ),
            0..40,
        )
    }

    fn build(ops: &[(u8, u8, u8, Vec<u8>)]) -> DataTree {
        let mut t = DataTree::new();
        let names = ["/a", "/b", "/a/x", "/a/y", "/b/z", "/a/x/q"];
        for (i, (kind, n, mode, data)) in ops.iter().enumerate() {
            let path = names[*n as usize].to_string();
            let zxid = i as i64 + 1;
            let mode = CreateMode::from_flags(i32::from(*mode)).unwrap_or(CreateMode::Persistent);
            let op = match kind {
                0 | 1 => TxnOp::Create {
                    path,
                    data: data.clone(),
                    acl: if data.len() % 2 == 0 {
                        Acl::open_unsafe()
                    } else {
                        vec![
                            Acl {
                                perms: perms::ALL,
                                id: Id::new("digest", "u:p"),
                            },
                            Acl {
                                perms: perms::READ,
                                id: Id::anyone(),
                            },
                        ]
                    },
                    mode,
                    ttl: if mode.is_ttl() { 5 } else { -1 },
                },
                2 => TxnOp::Delete { path, version: -1 },
                3 => TxnOp::SetData {
                    path,
                    data: data.clone(),
                    version: -1,
                },
                4 => TxnOp::SetAcl {
                    path,
                    acl: vec![Acl {
                        perms: perms::ALL,
                        id: Id::new("ip", "10.0.0.1"),
                    }],
                    version: -1,
                },
                _ => TxnOp::DeleteContainer { path },
            };
            let mut ev = Vec::new();
            let session = i64::from(*n % 2) + 1;
            let _ = t.apply_op(zxid, zxid, session, &[Id::new("super", "")], &op, &mut ev);
            t.set_last_processed_zxid(zxid);
        }
        t
    }

    proptest! {
        #[test]
        fn snapshot_encode_decode_round_trips(ops in arb_ops()) {
            let t = build(&ops);
            let bytes = t.encode();
            let back = DataTree::decode(&bytes).unwrap();
            prop_assert_eq!(&back, &t);
            prop_assert_eq!(back.encode(), bytes);
            prop_assert_eq!(back.approximate_data_size(), t.approximate_data_size());
            prop_assert_eq!(back.ephemerals_by_session(), t.ephemerals_by_session());
        }

        #[test]
        fn a_failed_multi_leaves_the_tree_unchanged(ops in arb_ops(), multi in arb_ops()) {
            let mut t = build(&ops);
            let before = t.clone();
            let names = ["/a", "/b", "/a/x", "/a/y", "/b/z", "/a/x/q"];
            let mut txn: Vec<TxnOp> = multi.iter().map(|(k, n, _, d)| {
                let path = names[*n as usize].to_string();
                match k {
                    0 | 1 => TxnOp::Create { path, data: d.clone(), acl: Acl::open_unsafe(), mode: CreateMode::Persistent, ttl: -1 },
                    2 => TxnOp::Delete { path, version: -1 },
                    3 => TxnOp::SetData { path, data: d.clone(), version: -1 },
                    4 => TxnOp::SetAcl { path, acl: vec![Acl { perms: 1, id: Id::new("digest", "x:y") }], version: -1 },
                    _ => TxnOp::Check { path, version: -1 },
                }
            }).collect();
            // Always fails at the end.
            txn.push(TxnOp::Check { path: "/never".into(), version: -1 });
            let mut ev = Vec::new();
            prop_assert!(t.apply_multi(1000, 0, 1, &[], &txn, &mut ev).is_err());
            prop_assert!(ev.is_empty());
            prop_assert_eq!(&t, &before);
        }
    }

    #[test]
    fn fuzz_tree_decode_never_panics_and_reencodes() {
        bolero::check!().for_each(|input: &[u8]| {
            if let Ok(t) = DataTree::decode(input) {
                // A decoded tree is consistent: it encodes and decodes to itself.
                assert_eq!(DataTree::decode(&t.encode()).as_ref(), Ok(&t));
            }
        });
    }

    #[test]
    fn fuzz_tree_decode_of_mutated_valid_trees_never_panics() {
        let mut t = DataTree::new();
        ok(&mut t, 1, create("/a", CreateMode::Container));
        ok(&mut t, 2, create("/a/b", CreateMode::Ephemeral));
        ok(&mut t, 3, create("/t", CreateMode::PersistentWithTtl));
        let valid = t.encode();
        bolero::check!()
            .with_type::<(u16, u8)>()
            .for_each(|(at, byte)| {
                let mut b = valid.clone();
                let i = usize::from(*at) % b.len();
                b[i] = *byte;
                if let Ok(t) = DataTree::decode(&b) {
                    assert_eq!(DataTree::decode(&t.encode()).as_ref(), Ok(&t));
                }
            });
    }
}
