//! Conformance cases on nodes: create, read, errors, sequential names, conditional writes,
//! atomic multi.

use super::case::{Case, CaseResult};
use super::{op_err, CoordinationCluster};
use crate::error::CoordinationError;
use crate::path::join;
use crate::types::{CreateMode, Op, OpResult, ANY_VERSION};

/// Persistent create, read back with its `Stat`; `exists` and `children` see it.
pub async fn create_and_read(h: &dyn CoordinationCluster) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("create_and_read", "connect"))?;
    let case = Case::start("create_and_read", c.as_ref()).await?;
    let path = case.p("node");
    let (created, stat) = case.op(
        "create",
        c.create(&path, b"hello", CreateMode::Persistent).await,
    )?;
    ensure!(case, created == path, "create returned {created}");
    ensure!(
        case,
        stat.version == 0 && stat.ephemeral_owner == 0,
        "fresh stat {stat:?}"
    );
    let (data, read) = case.op("get_data", c.get_data(&path, false).await)?;
    ensure!(case, data == b"hello", "data {data:?}");
    ensure!(
        case,
        read.version == 0 && read.data_length == 5 && read.num_children == 0,
        "stat {read:?}"
    );
    ensure!(
        case,
        read.czxid > 0 && read.czxid == read.mzxid,
        "zxids {read:?}"
    );
    ensure!(
        case,
        read.czxid == stat.czxid,
        "create stat {stat:?} vs read stat {read:?}"
    );
    let exists = case.op("exists", c.exists(&path, false).await)?;
    ensure!(
        case,
        exists.map(|s| s.czxid) == Some(read.czxid),
        "exists {exists:?}"
    );
    let missing = case.op("exists missing", c.exists(&case.p("missing"), false).await)?;
    ensure!(case, missing.is_none(), "missing node exists: {missing:?}");
    case.op(
        "create b",
        c.create(&case.p("b"), b"", CreateMode::Persistent).await,
    )?;
    case.op(
        "create a",
        c.create(&case.p("a"), b"", CreateMode::Persistent).await,
    )?;
    let children = case.op("children", c.children(&case.root, false).await)?;
    ensure!(
        case,
        children == ["a", "b", "node"],
        "children {children:?} (sorted)"
    );
    let (_, root_stat) = case.op("get root", c.get_data(&case.root, false).await)?;
    ensure!(
        case,
        root_stat.num_children == 3,
        "num_children {root_stat:?}"
    );
    Ok(())
}

/// Create, read and delete report ZooKeeper's errors.
pub async fn typed_errors(h: &dyn CoordinationCluster) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("typed_errors", "connect"))?;
    let case = Case::start("typed_errors", c.as_ref()).await?;
    let path = case.p("x");
    case.op("create", c.create(&path, b"", CreateMode::Persistent).await)?;
    case.expect_err(
        "duplicate create",
        c.create(&path, b"", CreateMode::Persistent).await,
        |e| matches!(e, CoordinationError::NodeExists { .. }),
    )?;
    case.expect_err(
        "create without parent",
        c.create(&case.p("no/child"), b"", CreateMode::Persistent)
            .await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    case.expect_err(
        "get missing",
        c.get_data(&case.p("none"), false).await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    case.expect_err(
        "children of missing",
        c.children(&case.p("none"), false).await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    case.expect_err(
        "set missing",
        c.set_data(&case.p("none"), b"", ANY_VERSION).await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    case.expect_err(
        "delete missing",
        c.delete(&case.p("none"), ANY_VERSION).await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    let eph = case.p("eph");
    case.op(
        "create ephemeral",
        c.create(&eph, b"", CreateMode::Ephemeral).await,
    )?;
    case.expect_err(
        "child of ephemeral",
        c.create(&join(&eph, "child"), b"", CreateMode::Persistent)
            .await,
        |e| matches!(e, CoordinationError::NoChildrenForEphemerals { .. }),
    )?;
    for bad in ["relative", "/trailing/", "/double//slash"] {
        case.expect_err(bad, c.create(bad, b"", CreateMode::Persistent).await, |e| {
            matches!(e, CoordinationError::BadPath { .. })
        })?;
    }
    case.expect_err(
        "create root",
        c.create("/", b"", CreateMode::Persistent).await,
        |e| matches!(e, CoordinationError::NodeExists { .. }),
    )?;
    case.expect_err("delete root", c.delete("/", ANY_VERSION).await, |e| {
        matches!(e, CoordinationError::BadArguments(_))
    })?;
    Ok(())
}

/// Sequential nodes get the parent's 10-digit counter appended, increasing.
pub async fn sequential_nodes(h: &dyn CoordinationCluster) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("sequential_nodes", "connect"))?;
    let case = Case::start("sequential_nodes", c.as_ref()).await?;
    let prefix = case.p("isr_change_");
    let (first, _) = case.op(
        "seq 1",
        c.create(&prefix, b"1", CreateMode::PersistentSequential)
            .await,
    )?;
    let (second, _) = case.op(
        "seq 2",
        c.create(&prefix, b"2", CreateMode::PersistentSequential)
            .await,
    )?;
    let (third, _) = case.op(
        "seq 3 ephemeral",
        c.create(&prefix, b"3", CreateMode::EphemeralSequential)
            .await,
    )?;
    for p in [&first, &second, &third] {
        let suffix = p.strip_prefix(&prefix).unwrap_or("");
        ensure!(
            case,
            suffix.len() == 10 && suffix.bytes().all(|b| b.is_ascii_digit()),
            "sequential path {p}"
        );
    }
    ensure!(
        case,
        first < second && second < third,
        "order {first} {second} {third}"
    );
    ensure!(
        case,
        first == format!("{prefix}0000000000"),
        "first of a fresh parent is {first}"
    );
    let children = case.op("children", c.children(&case.root, false).await)?;
    ensure!(case, children.len() == 3, "children {children:?}");
    Ok(())
}

/// `set_data` and `delete` succeed only with the current version (or any version).
pub async fn conditional_writes(h: &dyn CoordinationCluster) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("conditional_writes", "connect"))?;
    let case = Case::start("conditional_writes", c.as_ref()).await?;
    let path = case.p("state");
    let (_, created) = case.op(
        "create",
        c.create(&path, b"v0", CreateMode::Persistent).await,
    )?;
    let s1 = case.op("set v0", c.set_data(&path, b"v1", 0).await)?;
    ensure!(
        case,
        s1.version == 1 && s1.mzxid > created.czxid && s1.czxid == created.czxid,
        "{s1:?}"
    );
    case.expect_err("stale set", c.set_data(&path, b"stale", 0).await, |e| {
        matches!(e, CoordinationError::BadVersion { .. })
    })?;
    let (data, _) = case.op("get", c.get_data(&path, false).await)?;
    ensure!(
        case,
        data == b"v1",
        "a failed CAS changed the data: {data:?}"
    );
    let s2 = case.op("set any", c.set_data(&path, b"v2", ANY_VERSION).await)?;
    ensure!(case, s2.version == 2, "{s2:?}");
    case.op(
        "child",
        c.create(&join(&path, "c"), b"", CreateMode::Persistent)
            .await,
    )?;
    case.expect_err(
        "delete non-empty",
        c.delete(&path, ANY_VERSION).await,
        |e| matches!(e, CoordinationError::NotEmpty { .. }),
    )?;
    case.op("delete child", c.delete(&join(&path, "c"), 0).await)?;
    case.expect_err("stale delete", c.delete(&path, 1).await, |e| {
        matches!(e, CoordinationError::BadVersion { .. })
    })?;
    case.op("delete", c.delete(&path, 2).await)?;
    let gone = case.op("exists", c.exists(&path, false).await)?;
    ensure!(case, gone.is_none(), "deleted node still exists");
    Ok(())
}

/// `multi` is all or nothing; a failing op is reported by index; results come in op order.
pub async fn multi_is_atomic(h: &dyn CoordinationCluster) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("multi_is_atomic", "connect"))?;
    let case = Case::start("multi_is_atomic", c.as_ref()).await?;
    let epoch = case.p("controller_epoch");
    case.op(
        "create epoch",
        c.create(&epoch, b"0", CreateMode::Persistent).await,
    )?;
    let results = case.op(
        "multi",
        c.multi(vec![
            Op::create(case.p("controller"), b"1".to_vec(), CreateMode::Ephemeral),
            Op::set_data(&epoch, b"1".to_vec(), 0),
            Op::create(case.p("seq-"), Vec::new(), CreateMode::PersistentSequential),
            Op::check(&epoch, 1),
        ])
        .await,
    )?;
    ensure!(case, results.len() == 4, "results {results:?}");
    ensure!(
        case,
        results[0]
            == OpResult::Create {
                path: case.p("controller")
            },
        "result 0 {:?}",
        results[0]
    );
    ensure!(
        case,
        matches!(results[1], OpResult::SetData { stat } if stat.version == 1),
        "result 1 {:?}",
        results[1]
    );
    ensure!(
        case,
        matches!(&results[2], OpResult::Create { path } if path.starts_with(&case.p("seq-"))),
        "result 2 {:?}",
        results[2]
    );
    ensure!(
        case,
        results[3] == OpResult::Check,
        "result 3 {:?}",
        results[3]
    );
    let (_, controller) = case.op(
        "get controller",
        c.get_data(&case.p("controller"), false).await,
    )?;
    let (_, epoch_stat) = case.op("get epoch", c.get_data(&epoch, false).await)?;
    ensure!(
        case,
        controller.czxid == epoch_stat.mzxid,
        "one transaction, one zxid"
    );

    // A fenced write: the check on the old epoch version fails, nothing is applied.
    let before = case.op("children", c.children(&case.root, false).await)?;
    let fenced = c
        .multi(vec![
            Op::check(&epoch, 0),
            Op::create(case.p("partition"), Vec::new(), CreateMode::Persistent),
        ])
        .await;
    match &fenced {
        Err(CoordinationError::MultiOpFailed { index: 0, error })
            if matches!(**error, CoordinationError::BadVersion { .. }) => {}
        other => return case.fail(format!("fenced multi: {other:?}")),
    }
    // A failure in the middle rolls back the earlier ops.
    let failed = c
        .multi(vec![
            Op::create(case.p("first"), Vec::new(), CreateMode::Persistent),
            Op::set_data(&epoch, b"2".to_vec(), 1),
            Op::delete(case.p("missing"), ANY_VERSION),
            Op::create(case.p("last"), Vec::new(), CreateMode::Persistent),
        ])
        .await;
    match &failed {
        Err(CoordinationError::MultiOpFailed { index: 2, error })
            if matches!(**error, CoordinationError::NoNode { .. }) => {}
        other => return case.fail(format!("failing multi: {other:?}")),
    }
    let after = case.op("children", c.children(&case.root, false).await)?;
    ensure!(
        case,
        before == after,
        "failed multis changed children: {before:?} -> {after:?}"
    );
    let (data, s) = case.op("get epoch", c.get_data(&epoch, false).await)?;
    ensure!(
        case,
        data == b"1" && s.version == 1,
        "epoch changed by a failed multi: {s:?}"
    );
    let empty = case.op("empty multi", c.multi(Vec::new()).await)?;
    ensure!(case, empty.is_empty(), "empty multi results {empty:?}");
    Ok(())
}

/// A fenced batch of conditional writes (`check` + many `set_data`, as a controller batches
/// partition states) with stale versions in the middle fails as a whole, reports the first
/// stale write by its index with `BadVersion` on its path, and applies nothing; without the
/// stale writes the same batch applies in one transaction.
pub async fn multi_reports_the_first_bad_version(h: &dyn CoordinationCluster) -> CaseResult {
    const NAME: &str = "multi_reports_the_first_bad_version";
    let c = h.connect().await.map_err(op_err(NAME, "connect"))?;
    let case = Case::start(NAME, c.as_ref()).await?;
    let epoch = case.p("epoch");
    case.op(
        "create epoch",
        c.create(&epoch, b"1", CreateMode::Persistent).await,
    )?;
    let count = 40;
    let paths: Vec<String> = (0..count).map(|i| case.p(&format!("s{i:02}"))).collect();
    for p in &paths {
        case.op(
            "create state",
            c.create(p, b"0", CreateMode::Persistent).await,
        )?;
    }
    // Two states move on behind the batch's back.
    for stale in [17, 31] {
        case.op("bump", c.set_data(&paths[stale], b"x", 0).await)?;
    }
    let batch = |skip: &[usize]| {
        let mut ops = vec![Op::check(&epoch, 0)];
        ops.extend(
            paths
                .iter()
                .enumerate()
                .filter(|(i, _)| !skip.contains(i))
                .map(|(_, p)| Op::set_data(p, b"1".to_vec(), 0)),
        );
        ops
    };
    match c.multi(batch(&[])).await {
        Err(CoordinationError::MultiOpFailed { index: 18, error })
            if *error
                == CoordinationError::BadVersion {
                    path: paths[17].clone(),
                } => {}
        other => return case.fail(format!("batch with stale writes: {other:?}")),
    }
    let reads = c.get_data_many(&paths).await;
    for (i, r) in reads.into_iter().enumerate() {
        let (data, stat) = case.op("read state", r)?;
        let bumped = i == 17 || i == 31;
        ensure!(
            case,
            stat.version == i32::from(bumped) && data == if bumped { b"x" } else { b"0" },
            "state {i} changed by a failed multi: {data:?} {stat:?}"
        );
    }
    let applied = case.op(
        "batch without stale writes",
        c.multi(batch(&[17, 31])).await,
    )?;
    ensure!(case, applied.len() == count - 1, "results {applied:?}");
    ensure!(
        case,
        applied[0] == OpResult::Check
            && applied[1..]
                .iter()
                .all(|r| matches!(r, OpResult::SetData { stat } if stat.version == 1)),
        "results {applied:?}"
    );
    Ok(())
}

/// `get_data_many` returns one result per path, in order: data and stat like `get_data`,
/// `NoNode` for a missing node, `BadPath` for a malformed path, and works for more paths than
/// one request of the backend carries.
pub async fn bulk_read(h: &dyn CoordinationCluster) -> CaseResult {
    let c = h.connect().await.map_err(op_err("bulk_read", "connect"))?;
    let case = Case::start("bulk_read", c.as_ref()).await?;
    let count = 1100;
    let mut paths = Vec::with_capacity(count + 2);
    let creates: Vec<Op> = (0..count)
        .map(|i| {
            let path = case.p(&format!("n{i:05}"));
            paths.push(path.clone());
            Op::create(path, format!("v{i}").into_bytes(), CreateMode::Persistent)
        })
        .collect();
    for chunk in creates.chunks(500) {
        case.op("create nodes", c.multi(chunk.to_vec()).await)?;
    }
    case.op(
        "set_data n00001",
        c.set_data(&case.p("n00001"), b"changed", ANY_VERSION).await,
    )?;
    paths.push(case.p("missing"));
    paths.push("no-slash".to_string());
    let reads = c.get_data_many(&paths).await;
    ensure!(
        case,
        reads.len() == count + 2,
        "{} results for {} paths",
        reads.len(),
        count + 2
    );
    for (i, r) in reads.iter().take(count).enumerate() {
        let expected: Vec<u8> = if i == 1 {
            b"changed".to_vec()
        } else {
            format!("v{i}").into_bytes()
        };
        match r {
            Ok((data, stat)) => {
                ensure!(case, *data == expected, "node {i}: data {data:?}");
                let version = i32::from(i == 1);
                ensure!(case, stat.version == version, "node {i}: stat {stat:?}");
            }
            Err(e) => ensure!(case, false, "node {i}: {e}"),
        }
    }
    ensure!(
        case,
        matches!(
            reads.get(count),
            Some(Err(CoordinationError::NoNode { .. }))
        ),
        "missing node: {:?}",
        reads.get(count)
    );
    ensure!(
        case,
        matches!(
            reads.get(count + 1),
            Some(Err(CoordinationError::BadPath { .. }))
        ),
        "bad path: {:?}",
        reads.get(count + 1)
    );
    ensure!(
        case,
        c.get_data_many(&[]).await.is_empty(),
        "no paths, no results"
    );
    Ok(())
}
