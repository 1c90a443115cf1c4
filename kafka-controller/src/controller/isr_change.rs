//! ISR change notifications (Kafka's `KafkaController.processIsrChangeNotification`): ZooKeeper-mode leaders that changed an ISR
//! write `/isr_change_notification/isr_change_<seq>`; the controller re-reads those
//! partitions' states, sends UpdateMetadata for them to every broker, checks whether a
//! reassignment can now finish, and deletes the notifications.

use std::collections::BTreeSet;

use futures::future::join_all;

use crate::context::TopicPartition;
use crate::zk_data::{paths, IsrChangeNotification};
use ha_coordination::path;

use super::failover::children_or_empty;
use super::{Controller, ControllerError};

impl Controller {
    /// `IsrChangeNotification`: handles and deletes every pending notification (watching the
    /// path again). Malformed notifications are logged and deleted.
    pub(super) async fn process_isr_change_notification(&mut self) -> Result<(), ControllerError> {
        let coord = self.zk.coordination().clone();
        let names = children_or_empty(&*coord, paths::ISR_CHANGE_NOTIFICATION, true).await?;
        if names.is_empty() {
            return Ok(());
        }
        let full: Vec<String> = names
            .iter()
            .map(|n| path::join(paths::ISR_CHANGE_NOTIFICATION, n))
            .collect();
        let reads = join_all(full.iter().map(|p| coord.get_data(p, false))).await;
        let mut tps = BTreeSet::new();
        for (p, r) in full.iter().zip(reads) {
            match r {
                Ok((data, _)) => match IsrChangeNotification::from_json(&data) {
                    Ok(n) => tps.extend(
                        n.partitions
                            .iter()
                            .map(|e| TopicPartition::new(e.topic.as_str(), e.partition)),
                    ),
                    Err(e) => {
                        tracing::warn!(path = %p, error = %e, "malformed ISR change notification")
                    }
                },
                Err(e) if e.is_no_node() => {}
                Err(e) => return Err(e.into()),
            }
        }
        let a = self.active()?;
        let known: Vec<TopicPartition> = tps
            .into_iter()
            .filter(|tp| a.ctx.partition_assignment(tp).is_some())
            .collect();
        let reads = a.store.read_states(&known).await;
        for (tp, r) in known.iter().zip(reads) {
            match r {
                Ok(Some(l)) => a.ctx.put_leadership(tp.clone(), l),
                Ok(None) => {}
                Err(e) => tracing::warn!(topic = %tp.topic, partition = tp.partition, error = %e,
                    "cannot read partition state"),
            }
        }
        a.batch.add_update_metadata_to_all(&a.ctx, &known);
        for chunk in full.chunks(1000) {
            a.store.delete_all(chunk).await?;
        }
        self.send_batch()?;
        self.check_reassignments(&known).await
    }
}
