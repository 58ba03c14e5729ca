"""sent"""
