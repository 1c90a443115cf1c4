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
    nodes: HashMap<String, Node>,
    /// Every distinct ACL list, shared by the nodes that carry it (ZooKeeper's
    /// `ReferenceCountedACLCache`).
    acls: HashSet<Arc<[Acl]>>,
    ephemerals: BTreeMap<i64, BTreeSet<String>>,
    containers: BTreeSet<String>,
    ttls: BTreeSet<String>,
    /// Sum of path and data lengths (`approximateDataSize`).
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
        let bad = if c == 0 {
            true
        } else if c == slash && last == slash {
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
        tree.nodes.insert("/".into(), Node::empty(open.clone()));
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
        self.data_size += (path.len() + node.data.len()) as i64;
        self.nodes.insert(path, node);
    }

    /// Removes the node at `path` from its parent and the indexes (its ACL reference stays
    /// with the returned node).
    fn remove_raw(&mut self, path: &str) -> Option<Node> {
        let node = self.nodes.remove(path)?;
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
        self.data_size -= (path.len() + node.data.len()) as i64;
        Some(node)
    }

    // ---- reads ----

    /// The node's data and stat (`getData`).
    pub fn get_data(&self, path: &str) -> Option<(&[u8], Stat)> {
        self.nodes.get(path).map(|n| (&n.data[..], n.stat()))
    }

    /// The node's stat (`exists`).
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.nodes.get(path).map(Node::stat)
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

    /// The sum of every node's path and data lengths (`approximateDataSize`).
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
            if let Some(n) = self.nodes.get(path) {
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
            if let Some(n) = self.nodes.get(path) {
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
                    if let Some(p) = self.nodes.get_mut(&parent) {
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
                    if let Some(p) = self.nodes.get_mut(&parent) {
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
                    if let Some(n) = self.nodes.get_mut(&path) {
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
                    if let Some(n) = self.nodes.get_mut(&path) {
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
        if let Some(p) = self.nodes.get_mut(&parent) {
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
        if self.nodes.contains_key(&path) {
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
        let parent = self.nodes.get_mut(&parent_path).ok_or(ErrorCode::NoNode)?;
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
            let Some(node) = self.nodes.get(&path) else {
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
                order.push(key);
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
                tree.data_size += (path.len() + node.data.len()) as i64;
                tree.nodes.insert(path, node);
                continue;
            }
            if validate_path(&path).is_err() || path == "/" {
                return Err(TreeError::BadPath(path));
            }
            if tree.nodes.contains_key(&path) {
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
