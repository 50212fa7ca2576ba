"""Collision detection (Computation chapter, "Collision detection").

Kept import-free: ``mjx_lite.types`` imports ``collision.types`` for the Contact pytree, so this
package must not import the driver (which imports ``mjx_lite.types``) at package import time.
"""
