//! Behaviour tests driving the router in-process, plus one through a real socket.
