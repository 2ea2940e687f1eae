//! Drainer scenarios: the real controller (`run::start`) with a real kube::Client over HTTP against the
//! real control plane when KUBEBUILDER_ASSETS is set (its disruption controller computes PDB status,
//! its garbage collector deletes pods without a real owner), else the test API server, or a real
//! cluster with NODEMEDIC_E2E=1. Names get a unique suffix, the drainer is restricted by a label
//! selector to the nodes the scenario made, and everything is deleted afterwards.

//!
//! One test binary (one control plane); scenarios by concern in the modules below.

mod budget;
mod drain;
mod early_pressure;
mod election;
mod env;
mod faults;
mod forged;
mod forms;
mod grants;
mod isolation;
mod kwok;
mod ladder;
mod machines;
mod medik8s;
mod memory;
mod outside;
mod peers;
mod rbac;
mod reload;
mod remedies;
mod restart;
mod safety;
mod start;
mod symptoms;
