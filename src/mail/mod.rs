//! mail (to be written)
