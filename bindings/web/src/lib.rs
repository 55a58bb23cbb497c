//! The waverun browser package. Work in progress.
