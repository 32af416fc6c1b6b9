mod coroutine;
mod on_stack;
