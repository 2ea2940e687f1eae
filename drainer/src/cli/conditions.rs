//! `kubectl nodemedic conditions`: every node's nodemedic conditions and drain record, read from
//! the live cluster. I/O (the reads and the table; the summary of each node is `live`'s).

use std::process::ExitCode;

use super::shared::{ClusterArgs, Output, block_on};

#[derive(clap::Args)]
pub struct ConditionsArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// text: for people; json: one JSON object per line, for scripts.
    #[arg(long, value_enum, default_value = "text")]
    pub output: Output,
}

pub(super) fn conditions(args: ConditionsArgs) -> ExitCode {
    use crate::live;
    let read = block_on(async {
        let client = live::client(
            args.cluster.kubeconfig.as_deref(),
            args.cluster.context.as_deref(),
        )
        .await?;
        live::read_nodes(&client).await
    });
    let nodes = match read {
        Err(code) => return code,
        Ok(Err(e)) => {
            eprintln!("kubectl-nodemedic: {e}");
            return ExitCode::from(1);
        }
        Ok(Ok(nodes)) => nodes,
    };
    let mut rows: Vec<live::NodeSummary> = nodes.iter().map(live::summarise).collect();
    rows.sort_by(|a, b| a.node.cmp(&b.node));
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match live::print_summaries(&rows, args.output == Output::Json, &mut out)
        .and_then(|()| std::io::Write::flush(&mut out))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubectl-nodemedic: writing failed: {e}");
            ExitCode::from(1)
        }
    }
}
