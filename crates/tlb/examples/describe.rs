//! Prints every preset's summary, or the error for a config given as argument.
fn main() {
    match std::env::args().nth(1) {
        Some(arg) => match pagelab_tlb::resolve(&arg) {
            Ok(cfg) => println!("{}", cfg.describe()),
            Err(e) => println!("error: {e}"),
        },
        None => {
            for (_, cfg) in pagelab_tlb::presets() {
                println!("{}\n", cfg.describe());
            }
        }
    }
}
