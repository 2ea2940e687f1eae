//! What the controller hands the fleet from outside each round: the pause read from the Lease, and
//! kured's lock (`--kured-daemonset`). Pure.

use super::Fleet;
use crate::decide::facts::Pause;
use crate::decide::gates::reboot_lock::KuredLock;

impl Fleet {
    /// The pause read from the Lease (None: not paused).
    pub(crate) fn set_pause(&mut self, p: Option<Pause>) {
        self.safety.paused = p;
    }

    /// kured's lock as last read (`--kured-daemonset`): its DaemonSet and the lock.
    pub(crate) fn set_kured(&mut self, k: Option<(String, KuredLock)>) {
        self.safety.peers.kured = k;
    }
}
