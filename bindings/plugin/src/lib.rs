//! The waverun plugin (see bindings/ABI.md). Work in progress.
