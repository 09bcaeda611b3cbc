//! `ruststream test`: a component fed a records file, checked against an expectations file
//! (`ruststream_fleet::testrun`).

use std::process::ExitCode;

use ruststream_fleet::testrun::TestOptions;

use crate::args::TestArgs;

/// Runs the test and prints its report; the exit status says how it went.
pub(crate) async fn test(args: TestArgs) -> ExitCode {
    ruststream_fleet::testrun::test(options(args)).await
}

/// The flags as the library takes them.
fn options(args: TestArgs) -> TestOptions {
    TestOptions {
        component: args.component,
        records: args.records,
        expect: args.expect,
        compile: args.compile.options(),
    }
}
